package trash

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway/provenance"
)

// attack69 F4: a device rewriting its own drawers filled the trash with
// its own old texts for 30 days. What the trash keeps of a device's own
// text is bounded (OwnQuota), its oldest dropped first; another device's
// text it replaced, and text of unknown origin, stay.
func TestOwnTextIsKeptUnderAQuota(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "trash.sqlite"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.OwnQuota = 3 * 1000
	by := func(dev string) *provenance.Stamp { return &provenance.Stamp{Device: dev} }
	keep := func(dev, content string, origin *provenance.Stamp) int64 {
		t.Helper()
		dr := Drawer{ID: "drawer_" + content[:8], Wing: "wing_ci", Room: "r", Content: content, Metadata: json.RawMessage(`{}`), Origin: origin}
		id, err := s.Keep(ctx, Delete{Device: dev, Tool: "update_drawer", Drawers: []Drawer{dr}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(ctx, id, StateDeleted, "", nil); err != nil {
			t.Fatal(err)
		}
		return id
	}
	text := func(tag string) string { return tag + strings.Repeat(".", 990) }
	desks := keep("ci", text("desk0001"), by("desk"))     // desk's text ci replaced
	unknown := keep("ci", text("unknown1"), nil)          // text of unknown origin
	deskOwn := keep("desk", text("deskown1"), by("desk")) // another device's own
	var own []int64
	for _, tag := range []string{"ciown001", "ciown002", "ciown003", "ciown004", "ciown005"} {
		own = append(own, keep("ci", text(tag), by("ci")))
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, d := range list {
		ids = append(ids, d.ID)
	}
	for _, id := range append([]int64{desks, unknown, deskOwn}, own[2:]...) {
		if !slices.Contains(ids, id) {
			t.Errorf("delete %d dropped; the trash holds %v", id, ids)
		}
	}
	for _, id := range own[:2] {
		if slices.Contains(ids, id) {
			t.Errorf("ci's own old text, delete %d, kept over the quota of three: %v", id, ids)
		}
	}
}
