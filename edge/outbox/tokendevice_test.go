package outbox_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Each op records the device the gateway named the token when it was
// queued (the header the edge kept), not the .env's origin device: none
// before a gateway answer was kept, or when what was kept does not read.
func TestAnOpRecordsTheDeviceTheGatewayNamedTheToken(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "typo-01", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i, c := range []struct{ kept, want string }{
		{"", ""},
		{`{"version":1,"id":"tmp-0042","label":"tmpbox"}`, "tmp-0042"},
		{`not json`, ""},
	} {
		if err := s.SetMeta(ctx, outbox.MetaDeviceSeen, c.kept); err != nil {
			t.Fatal(err)
		}
		op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_kg_add", Payload: []byte(`{"subject":"s` + string(rune('a'+i)) + `","predicate":"p","object":"o"}`)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, op.LocalSeq)
		if err != nil {
			t.Fatal(err)
		}
		if op.TokenDevice != c.want || got.TokenDevice != c.want || got.OriginDevice != "typo-01" {
			t.Errorf("kept %q: the op records %q (read back %q, origin %q), want %q", c.kept, op.TokenDevice, got.TokenDevice, got.OriginDevice, c.want)
		}
	}
}
