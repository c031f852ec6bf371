package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A diary entry edited with update_drawer keeps its writer in diary_read,
// as in every other read, with the diary's agent: desk, which trusts only
// the admin and withholds the rest, still reads its own edited entries,
// a long edit chunk by chunk, and one a restore wrote again after its
// delete (attack99 F3). Before, diary_read named device "unknown" (the
// entry's diary key, by its text, had no stamp) and withheld them, and
// every read lost the agent.
func TestAnEditedDiaryEntryKeepsItsWriterInDiaryRead(t *testing.T) {
	t.Parallel()
	editedDiaryEntryKeepsItsWriter(t, newGW(t, trustingDevices(UntrustedWithhold)))
}

// TestAnEditedDiaryEntryKeepsItsWriterInDiaryRead against MemPalace 3.11.0
// serve: its get_drawer names the entry's agent and filed_at, diary_read's
// timestamp.
func TestRealAnEditedDiaryEntryKeepsItsWriterInDiaryRead(t *testing.T) {
	u, _ := startReal(t)
	editedDiaryEntryKeepsItsWriter(t, newGWAt(t, trustingDevices(UntrustedWithhold), u))
}

// editedDiaryEntryKeepsItsWriter is TestAnEditedDiaryEntryKeepsItsWriterInDiaryRead through g.
func editedDiaryEntryKeepsItsWriter(t *testing.T, g *gw) {
	desk := g.tokens["desk-9b21"]
	must := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, rpc, _ := g.call(desk, tool, args)
		if rpc != nil || res["success"] == false || res["error"] != nil {
			t.Fatalf("%s: %v %v", tool, res, rpc)
		}
		return res
	}
	edit := func(text, edited string) string {
		id := str(must("diary_write", map[string]any{"agent_name": "pi", "entry": text})["entry_id"])
		must("update_drawer", map[string]any{"drawer_id": id, "content": edited})
		return id
	}
	short := edit("online entry to edit", "online entry EDITED")
	edit("a short entry", strings.Repeat("a long edit about the release, ", 40)) // over one 800-character chunk
	wantDesk := func(when string, n int) {
		t.Helper()
		r := must("diary_read", map[string]any{"agent_name": "pi", "last_n": 10})
		entries, _ := r["entries"].([]any)
		if len(entries) != n || r["untrusted_withheld"] != nil {
			t.Errorf("%s: diary_read %v, want %d entries, none withheld", when, r, n)
		}
		for _, e := range entries {
			if o := originOf(t, e); o["device"] != "desk-9b21" || o["agent"] != "pi" {
				t.Errorf("%s: entry %.40q: origin %v, want desk-9b21, agent pi", when, e.(map[string]any)["content"], o)
			}
		}
	}
	wantDesk("after the edits", 3) // the short one, the long one's two chunks
	if got := must("get_drawer", map[string]any{"drawer_id": short}); originOf(t, got)["agent"] != "pi" {
		t.Errorf("get_drawer of the edited entry: origin %v, want agent pi", originOf(t, got))
	}

	if res, rpc, _ := g.call(g.tokens["admin-0001"], "delete_drawer", map[string]any{"drawer_id": short}); rpc != nil || res["success"] != true {
		t.Fatalf("delete: %v %v", res, rpc)
	}
	rs, err := g.restorer(t).Restore(context.Background(), []string{fmt.Sprint(g.kept(t)[0].ID)})
	if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].As == short {
		t.Fatalf("restore: %+v %v, want the entry written again", rs, err)
	}
	wantDesk("after the restore", 3)
}
