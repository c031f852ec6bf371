package join

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/palacefiles"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// TestRealJoinOfAPalaceWithoutDrawers joins palaces real MemPalace 3.11.0
// holds no drawer collection for: it answers every drawer read of them
// with an error ("Chroma database missing" before a search, "Backend open
// failed" after one, since a search creates chroma.sqlite3 without the
// collection). A devbox that only ever recorded facts joins them, verified
// clean; a palace with nothing at all joins as nothing to send.
func TestRealJoinOfAPalaceWithoutDrawers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		search bool
		facts  []realpalace.Call
	}{
		{"facts only", false, []realpalace.Call{realpalace.Fact("Alice", "works_on", "devbox", "", ""), realpalace.Fact("Alice", "lived_in", "Oslo", "2020-01-01", "2023-06-30")}},
		{"facts and a search", true, []realpalace.Call{realpalace.Fact("Alice", "works_on", "devbox", "", "")}},
		{"nothing but a search", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			local := realpalace.New(t)
			s := local.Stdio(t)
			s.Seed(t, c.facts...)
			if c.search {
				if r := s.MustCall(t, "mempalace_search", map[string]any{"query": "anything"}); r["error"] == nil {
					t.Fatalf("a search of a palace without drawers: %v (expected MemPalace's error)", r)
				}
			}
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(filepath.Join(local.Dir, palacefiles.ChromaFile))
			if c.search == (err != nil) {
				t.Fatalf("after a search %v, chroma.sqlite3: %v", c.search, err)
			}
			srv := realpalace.New(t).Serve(t, "tok-join-empty")
			rep := run(t, realConfig(local, srv), Options{Verify: All, Seed: 3})
			if !rep.OK() {
				t.Fatalf("join: failed %+v, mismatches %+v", rep.Failed, rep.Mismatches)
			}
			if rep.Sent[Drawers] != 0 || rep.Sent[Diaries] != 0 || rep.Sent[Facts] != len(c.facts) {
				t.Fatalf("sent %v, want %d facts and nothing else", rep.Sent, len(c.facts))
			}
			if len(c.facts) > 0 {
				q := srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": "Alice"})
				if got := fmt.Sprint(q["facts"]); !strings.Contains(got, "devbox") {
					t.Fatalf("the primary's facts on Alice: %s", got)
				}
			}
			if rep2 := run(t, realConfig(local, srv), Options{Verify: All}); !rep2.OK() || primaryWrites(rep2) != 0 {
				t.Fatalf("a second join: ok %v, calls %v, failed %+v", rep2.OK(), rep2.Calls, rep2.Failed)
			}
		})
	}
}
