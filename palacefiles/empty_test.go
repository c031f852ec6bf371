package palacefiles

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
)

// chroma writes a ChromaFile with Chroma's collections table holding
// names (the real file is tested in the edge's and doctor's real tests).
func chroma(t *testing.T, dir string, names ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, ChromaFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE collections (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE)"); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := db.Exec("INSERT INTO collections VALUES (?, ?)", n, n); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEmpty(t *testing.T) {
	for _, c := range []struct {
		name    string
		set     func(t *testing.T, dir string)
		empty   bool
		failing bool
	}{
		{"a new palace: no file", func(*testing.T, string) {}, true, false},
		{"after a search: the file, no collection", func(t *testing.T, d string) { chroma(t, d) }, true, false},
		{"after a write: the drawers collection", func(t *testing.T, d string) { chroma(t, d, "mempalace_drawers") }, false, false},
		{"another collection only", func(t *testing.T, d string) { chroma(t, d, "mempalace_closets") }, false, false},
		{"not Chroma's schema", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, ChromaFile), []byte("not a database"), 0o600)
		}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.set(t, dir)
			before, _ := os.ReadDir(dir)
			empty, err := Empty(dir)
			if empty != c.empty || (err != nil) != c.failing {
				t.Fatalf("Empty: %v, %v; want %v (an error: %v)", empty, err, c.empty, c.failing)
			}
			if after, _ := os.ReadDir(dir); len(after) != len(before) {
				t.Errorf("reading the palace left files: %v -> %v", before, after)
			}
		})
	}
}
