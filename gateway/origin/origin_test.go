package origin

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tidwall/sjson"
)

// What AppendJSON writes is JSON that Of and encoding/json read back the
// same, with hostile labels included.
func TestRoundTrip(t *testing.T) {
	for _, o := range []Origin{
		{Device: "laptop-7f3a", Label: "laptop", Agent: "opencode", At: "2026-11-30T12:00:00.123Z", Trusted: true},
		{Device: Unknown},
		{Device: "ops-0001", Label: "Jöns' \"desk\"\n\\ \x01 💻", Via: "ops-0001", Trusted: true, Palace: PalaceBoth},
	} {
		b := o.AppendJSON(nil)
		var viaStd Origin
		if err := json.Unmarshal(b, &viaStd); err != nil || viaStd != o {
			t.Errorf("%s: encoding/json reads %+v (%v)", b, viaStd, err)
		}
		rec, err := sjson.SetRawBytes([]byte(`{"drawer_id":"d","wing":"shared"}`), Key, b)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Of(rec)
		if !ok || !reflect.DeepEqual(got, o) {
			t.Errorf("Of(%s) = %+v %v", rec, got, ok)
		}
	}
	if b := (Origin{Device: Unknown}).AppendJSON(nil); string(b) != `{"device":"unknown","trusted":false}` {
		t.Errorf("unknown origin: %s", b)
	}
}

func TestAbsentOrMalformed(t *testing.T) {
	for _, rec := range []string{`{"drawer_id":"d"}`, `{"origin":"unknown"}`, `{"origin":{"label":"x"}}`, `{"origin":{"device":7}}`, `[]`} {
		if o, ok := Of([]byte(rec)); ok {
			t.Errorf("%s read as %+v", rec, o)
		}
	}
	if (Origin{Device: Unknown}).Known() || (Origin{}).Known() || !(Origin{Device: "d"}).Known() {
		t.Error("Known")
	}
}

func TestDeviceInContext(t *testing.T) {
	ctx := context.Background()
	if DeviceFrom(ctx) != "" {
		t.Error("a plain context names a device")
	}
	if DeviceFrom(WithDevice(ctx, "laptop-7f3a")) != "laptop-7f3a" {
		t.Error("WithDevice lost")
	}
}
