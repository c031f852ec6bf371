package join

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/palacefiles"
)

// drawerless answers every drawer read as MemPalace 3.11 answers a palace
// without a drawer collection, and kg_timeline with one fact.
type drawerless struct{ answer string }

func (d drawerless) Call(_ context.Context, tool string, _ map[string]any) (map[string]any, error) {
	if tool == "mempalace_kg_timeline" {
		return map[string]any{"timeline": []any{map[string]any{"subject": "Alice", "predicate": "works_on", "object": "devbox"}}}, nil
	}
	return map[string]any{"error": d.answer}, nil
}

// TestReadLocalTellsEmptyFromBroken: list_wings answered with an error is
// a palace without drawers only when its files say so (palacefiles.Empty);
// a palace that holds a collection, or whose files cannot tell, fails the
// read with MemPalace's own error, as before.
func TestReadLocalTellsEmptyFromBroken(t *testing.T) {
	t.Parallel()
	policy, err := edge.LoadPolicy(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	chroma := func(t *testing.T, dir string, collections ...string) {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, palacefiles.ChromaFile))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec("CREATE TABLE collections (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE)"); err != nil {
			t.Fatal(err)
		}
		for _, c := range collections {
			if _, err := db.Exec("INSERT INTO collections VALUES (?, ?)", c, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name, answer string
		set          func(t *testing.T, dir string)
		want         string // "" : read as no drawers
	}{
		{"no chroma.sqlite3", "Chroma database missing", func(*testing.T, string) {}, ""},
		{"after a search: no collection", "Backend open failed", func(t *testing.T, d string) { chroma(t, d) }, ""},
		{"a collection: really broken", "Backend open failed", func(t *testing.T, d string) { chroma(t, d, "mempalace_drawers") }, "local palace: list_wings: Backend open failed"},
		{"files that cannot tell", "Backend open failed", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, palacefiles.ChromaFile), []byte("not a database"), 0o600)
		}, "whether the palace holds drawers is unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.set(t, dir)
			man, err := readLocal(context.Background(), &reader{c: drawerless{c.answer}, side: "local"}, Selection{Policy: policy}, kgReader{},
				func() (bool, error) { return palacefiles.Empty(dir) }, nil)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("read: %v (manifest %+v), want %q", err, man, c.want)
				}
				return
			}
			if err != nil || !man.NoDrawers || len(man.Records) != 1 || man.Records[0].Kind != Facts || len(man.Failed) != 0 {
				t.Fatalf("read: %v, manifest %+v: want no drawers and the one fact", err, man)
			}
		})
	}
}
