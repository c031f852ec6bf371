package fakepalace_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	. "github.com/joakimp/devbox-config/fakepalace"
)

// Behaviour the release notes give for a release not served yet stays in
// the double behind its version switch: 3.12 writes timestamps with a UTC
// offset (filed_at, a diary entry's timestamp) and keeps hallways in the
// palace's hallways.sqlite3. The default release (3.11.0, the one the
// contract checks against the real server) writes the local time without
// an offset and no hallways.sqlite3.
func TestLaterReleaseBehindTheSwitch(t *testing.T) {
	at := time.Date(2026, 12, 2, 5, 0, 0, 250000000, time.FixedZone("east", 2*3600))
	for _, c := range []struct {
		version, stamp string
		hallways       bool
	}{
		{"", "2026-12-02T05:00:00.250000", false},
		{"3.11.0", "2026-12-02T05:00:00.250000", false},
		{"3.12.0", "2026-12-02T03:00:00.250000+00:00", true},
	} {
		t.Run("release "+c.version, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "palace")
			pl, err := New(Options{Dir: dir, Version: c.version, Now: func() time.Time { return at }})
			if err != nil {
				t.Fatal(err)
			}
			d := handle(t, pl, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "a note"})
			got := handle(t, pl, "mempalace_get_drawer", map[string]any{"drawer_id": d["drawer_id"]})
			if filed := got["metadata"].(map[string]any)["filed_at"]; filed != c.stamp {
				t.Errorf("filed_at %v, want %s", filed, c.stamp)
			}
			if w := handle(t, pl, "mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": "shipped"}); w["timestamp"] != c.stamp {
				t.Errorf("diary timestamp %v, want %s", w["timestamp"], c.stamp)
			}
			r := handle(t, pl, "mempalace_diary_read", map[string]any{"agent_name": "pi"})
			if e := r["entries"].([]any)[0].(map[string]any); e["timestamp"] != c.stamp {
				t.Errorf("diary_read timestamp %v, want %s", e["timestamp"], c.stamp)
			}
			file := filepath.Join(dir, "hallways.sqlite3")
			_, statErr := os.Stat(file)
			if (statErr == nil) != c.hallways {
				t.Fatalf("hallways.sqlite3 in the palace: %v, want %v", statErr == nil, c.hallways)
			}
			if HallwaysFile(dir, c.version) != map[bool]string{true: file, false: filepath.Join(filepath.Dir(dir), "hallways.json")}[c.hallways] {
				t.Errorf("HallwaysFile(%s) = %s", c.version, HallwaysFile(dir, c.version))
			}
			if c.hallways {
				db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				var n int
				if err := db.QueryRow(`SELECT count(*) FROM hallways`).Scan(&n); err != nil || n != 0 {
					t.Errorf("hallways table: %d rows, %v", n, err)
				}
			}
			if page := handle(t, pl, "mempalace_list_drawers", map[string]any{"wing": "w", "since": "2026-12-02T02:00:00+00:00"}); strings.HasSuffix(c.stamp, "+00:00") && page["count"] != 1.0 {
				t.Errorf("a since with an offset does not find the drawer: %v", page)
			}
		})
	}
}

// handle runs one tool on the double in process and decodes its answer.
func handle(t *testing.T, pl *Palace, tool string, args map[string]any) map[string]any {
	t.Helper()
	c := inProcess{pl}
	return call(t, c, tool, args)
}

// inProcess is the double's own handler as a connection.
type inProcess struct{ pl *Palace }

func (c inProcess) send(t *testing.T, msg string) []byte {
	t.Helper()
	b, err := c.pl.Handle([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
