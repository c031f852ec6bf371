package doctor

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/palacefiles"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// searchOnly runs one search on a fresh palace as real MemPalace 3.11.0
// answers it ("No palace found"): in a palace directory that exists it
// leaves chroma.sqlite3 with no collection and no embedder record, and the
// palace holds no data.
func searchOnly(t *testing.T, s *realpalace.Stdio, file string) {
	t.Helper()
	if r := s.MustCall(t, "mempalace_search", map[string]any{"query": "anything"}); r["error"] == nil {
		t.Fatalf("a search of a fresh palace: %v (expected MemPalace's error)", r)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("real MemPalace's search left no %s: %v", file, err)
	}
}

// TestRealDoctorOnASearchedEmptyPalace: a fresh palace an agent only
// searched (a devbox new to the fleet) holds no data, though the search
// created chroma.sqlite3. Doctor must not call it a palace with data:
// no embedder-sidecar finding for its missing mempalace_embedder.json
// (the first write records it), and no palace-location finding for a
// MemPalace palace elsewhere that nothing was written to.
func TestRealDoctorOnASearchedEmptyPalace(t *testing.T) {
	t.Run("embedder-sidecar", func(t *testing.T) {
		p := realpalace.New(t)
		searchOnly(t, p.Stdio(t), filepath.Join(p.Dir, palacefiles.ChromaFile))
		srv := primary(t, realToken, fakepalace.Options{})
		if split := realFindings(t, realBox(t, p, srv.URL(), realToken)); split != nil {
			t.Errorf("%+v", split)
		}
	})
	t.Run("palace-location", func(t *testing.T) {
		p := realpalace.New(t)
		// MemPalace's palace directory exists (a volume's mount point, say):
		// a search creates chroma.sqlite3 only in a directory that exists.
		xdg := filepath.Join(p.Home, ".config", "mempalace", "palace")
		if err := os.MkdirAll(xdg, 0o700); err != nil {
			t.Fatal(err)
		}
		s, err := p.StartStdioEnv([]string{"MEMPALACE_CONFIG_DIR="}, p.Bin("mempalace-mcp"))
		if err != nil {
			t.Fatal(err)
		}
		searchOnly(t, s, filepath.Join(xdg, palacefiles.ChromaFile))
		env := map[string]string{"XDG_CONFIG_HOME": filepath.Join(p.Home, ".config")}
		opts := Options{Home: p.Home, HomeFromFlag: true, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
		if fs := Run(context.Background(), opts); len(fs) != 0 {
			t.Fatalf("findings on a palace nothing was written to: %+v", fs)
		}
	})
}
