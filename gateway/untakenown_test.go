package gateway

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// laptop's own edit of a drawer, made after the operator dropped its
// edit refused for desk's and before the take, is read as laptop's own:
// with the primary down, unmarked (not called the dropped edit), and
// with the primary back while the drop's note still waits, laptop's text
// (not desk's older one). The next edge's first pass over the notes,
// which calls wait for, reads the note again, as every pass after the
// write did (review36 R1). Before, the pass put the drawer back among
// the untaken ones by its id alone.
func TestAnOwnEditAfterADropIsReadAsItsOwn(t *testing.T) {
	t.Parallel()
	st := aDropWhileDown(t)
	const own = "drawer ten: LAPTOP NEW own edit"
	st.laptop, _ = st.loggedEdge(t)
	if res := edgeCall(t, st.laptop, "update_drawer", map[string]any{"drawer_id": st.id, "content": own}); replication(res) != "queued" {
		t.Fatalf("laptop's own edit after the drop: %v", res)
	}
	st.stopLaptop(t)
	next, _ := st.loggedEdge(t)
	readsOwn(t, next, st.id, own, "primary down")
	st.sw.slowReads.Store(int64(2 * time.Second)) // the pass once the primary is back reads the drawer for 2 s: the note waits meanwhile
	st.sw.up()
	primaryHeard(t, next)
	readsOwn(t, next, st.id, own, "primary back, the note waiting")
}

// A drawer whose dropped edit waits for its take, and whose text on the
// primary is a writer's laptop does not trust (marked so, or withheld),
// is read as laptop's local text unmarked once the primary answers: the
// take keeps it (the note goes, KeptOwn), so "not taken yet" would never
// end (review36 R3). Before, both reads marked it so, or showed desk's.
func TestAnUntrustedTextIsNotMarkedUntaken(t *testing.T) {
	t.Parallel()
	for _, u := range []Untrusted{UntrustedMark, UntrustedWithhold} {
		t.Run(u.String(), func(t *testing.T) {
			t.Parallel()
			devs := slices.Clone(devices)
			devs[0].Trusts, devs[0].Untrusted = []string{"admin-0001"}, u
			st := aStaleEdit(t, devs)
			st.stopLaptop(t)
			st.sw.down()
			if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
				t.Fatal(err)
			}
			next, _ := st.loggedEdge(t)
			st.sw.slowReads.Store(int64(2 * time.Second)) // the pass once the primary is back reads the drawer for 2 s: the note waits meanwhile
			st.sw.up()
			primaryHeard(t, next)
			readsOwn(t, next, st.id, "drawer ten: LAPTOP version", "desk's text untrusted")
			settledNotes(t, st.ob)
		})
	}
}

// readsOwn checks that get_drawers and get_drawer of id answer want,
// from the local palace, unmarked.
func readsOwn(t *testing.T, s *mcp.ClientSession, id, want, when string) {
	t.Helper()
	for _, res := range []map[string]any{
		edgeCall(t, s, "get_drawers", map[string]any{"drawer_ids": []any{id}}), // first: get_drawer's slow read of the primary is the longer
		edgeCall(t, s, "get_drawer", map[string]any{"drawer_id": id}),
	} {
		mark, _ := res["edge"].(map[string]any)
		if got := recordOf(res, id)["content"]; got != want || mark["local"] != nil || mark["source"] == "primary" {
			t.Errorf("a read of the drawer, %s: %v (want %q from the local palace, unmarked)", when, res, want)
		}
	}
}

// primaryHeard waits until s's edge asks the primary again: a drawer
// no palace holds is answered by the primary, not "not answered".
func primaryHeard(t *testing.T, s *mcp.ClientSession) {
	t.Helper()
	waitUntil(t, "the edge asking the primary again", func() bool {
		res := edgeCall(t, s, "get_drawers", map[string]any{"drawer_ids": []any{"drawer_shared_c63_nosuch"}})
		mark, _ := res["edge"].(map[string]any)
		return mark["primary"] == nil
	})
}
