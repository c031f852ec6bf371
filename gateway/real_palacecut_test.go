package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// attack71 F3 with real MemPalace 3.11: a palace at a path with spaces
// and no database yet names the path in status and list_wings; a device
// that is not admin sees none of it, the admin device all of it.
func TestRealAPalacePathWithSpacesIsCutWhole(t *testing.T) {
	t.Parallel()
	p := realpalace.New(t)
	p.Dir = filepath.Join(t.TempDir(), "my palace (copy)", "p")
	if err := os.MkdirAll(filepath.Dir(p.Dir), 0o700); err != nil {
		t.Fatal(err)
	}
	srv := p.Serve(t, upstreamToken)
	g := newGWAt(t, devices, &upstream{name: "mempalace " + realpalace.Version, url: srv.URL})
	g.srv.ProbeUpstream(context.Background())
	for _, tool := range []string{"list_wings", "status", "get_taxonomy"} {
		m, e, _ := g.call(g.tokens["desk-9b21"], tool, map[string]any{})
		if all := fmt.Sprint(m, e); strings.Contains(all, "palace (copy)") || strings.Contains(all, "chroma.sqlite3") || !strings.Contains(all, "[path cut") {
			t.Errorf("desk's %s: %s", tool, all)
		}
	}
	if m, _, _ := g.call(g.tokens["admin-0001"], "list_wings", map[string]any{}); !strings.Contains(fmt.Sprint(m), p.Dir) {
		t.Errorf("admin's list_wings: %v", m)
	}
}
