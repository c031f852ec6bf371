package ledger

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestOpIDOf(t *testing.T) {
	good := opID("x")
	id, ok, err := OpIDOf(json.RawMessage(`{"name":"mempalace_add_drawer","arguments":{},"_meta":{"progressToken":1,"devbox-config/op-id":"` + good + `"}}`))
	if err != nil || !ok || id != good {
		t.Fatalf("got %q %v %v", id, ok, err)
	}
	for _, absent := range []string{`{"name":"x","arguments":{}}`, `{"_meta":{"progressToken":1}}`, `{"_meta":"x"}`, `null`, ``} {
		if id, ok, err := OpIDOf(json.RawMessage(absent)); ok || err != nil || id != "" {
			t.Fatalf("%s: got %q %v %v, want none", absent, id, ok, err)
		}
	}
	for value, want := range map[string]string{
		`"` + strings.ToUpper(good) + `"`: "at position",
		`"` + good[:63] + `"`:             "got 63 characters",
		`"` + good + `0"`:                 "got 65 characters",
		`"` + good[:63] + `g"`:            "got 'g' at position 64",
		`42`:                              "got a number",
		`null`:                            "got null",
		`{"id":"` + good + `"}`:           "got an object",
	} {
		_, ok, err := OpIDOf(json.RawMessage(`{"_meta":{"devbox-config/op-id":` + value + `}}`))
		if err == nil || ok || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `params._meta["devbox-config/op-id"]`) {
			t.Fatalf("%s: %v, want an error naming the field and %q", value, err, want)
		}
	}
}

func TestAdvertise(t *testing.T) {
	h := http.Header{}
	if Advertised(h) {
		t.Fatal("an answer without the header advertised a ledger")
	}
	Advertise(h)
	if h.Get("Devbox-Config-Ledger") != "op-id/1" || !Advertised(h) {
		t.Fatalf("header %v", h)
	}

	init := []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"experimental":{"other":{}}},"serverInfo":{"name":"mempalace","version":"3.6.0"}}}`)
	out := AdvertiseInitialize(init)
	res := gjson.GetBytes(out, "result")
	if !AdvertisedIn(json.RawMessage(res.Raw)) || !res.Get("capabilities.experimental.other").Exists() || res.Get("serverInfo.name").String() != "mempalace" {
		t.Fatalf("initialize answer: %s", out)
	}
	if AdvertisedIn(json.RawMessage(gjson.GetBytes(init, "result").Raw)) {
		t.Fatal("the upstream's own initialize advertised a ledger")
	}
	bare := AdvertiseInitialize([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}`))
	if !AdvertisedIn(json.RawMessage(gjson.GetBytes(bare, "result").Raw)) {
		t.Fatalf("no capabilities yet: %s", bare)
	}
	for _, unchanged := range []string{`{"jsonrpc":"2.0","id":0,"error":{"code":-32600,"message":"x"}}`, "event: message\ndata: {}\n\n"} {
		if got := AdvertiseInitialize([]byte(unchanged)); string(got) != unchanged {
			t.Fatalf("changed %s to %s", unchanged, got)
		}
	}
}

func TestResponseNullID(t *testing.T) {
	if got := string(response(nil, []byte(`{}`))); got != `{"jsonrpc":"2.0","id":null,"result":{}}` {
		t.Fatal(got)
	}
}
