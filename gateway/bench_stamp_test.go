package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/provenance"
)

// stampRecorded gives every drawer of a recorded answer a stamp in the
// gateway's provenance index, alternately laptop's and the admin's.
func stampRecorded(b *testing.B, g *gw, resp []byte) {
	m, _, err := answerText(resp)
	if err != nil {
		b.Fatal(err)
	}
	var es []provenance.Entry
	for _, list := range []string{"results", "drawers"} {
		for i, it := range m.Get(list).Array() {
			st := provenance.Stamp{Device: "laptop-7f3a", Label: "laptop", Agent: "opencode", At: time.Now()}
			if i%2 == 1 {
				st = provenance.Stamp{Device: "admin-0001", Label: "ops", Agent: "pi", At: time.Now()}
			}
			es = append(es, provenance.Entry{Key: provenance.Drawer(it.Get("drawer_id").Str), Stamp: st})
		}
	}
	if err := g.srv.prov.Record(context.Background(), es...); err != nil {
		b.Fatal(err)
	}
}
