package join

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// A batch of drawers whose answer is larger than a client takes (the
// edge's 64 MiB, from the local palace or the primary: 500 drawers of
// 130 KB pass it) is read again in halves, not failed: reading the local
// palace, looking up updated drawers on the primary, and verifying both
// sides. The caps are lowered in the doubles (the local palace's server
// ends, as the edge ends a connection whose line passes its cap; the
// primary's answers are cut, as a client reading at most its cap sees
// them), so the test writes kilobytes, not 64 MiB. The halves are still
// batches: no drawer is read one by one.
func TestJoinReadsBatchesTooLargeForOneAnswer(t *testing.T) {
	t.Parallel()
	const n, size, capBytes = 12, 8000, 70000 // a page of list_drawers (previews) and six drawers fit, twelve do not
	p := newPalace(t)
	pl, srv := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: testToken, CutAnswersAt: capBytes})
	local := func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }
	remote := func(tool string, args map[string]any) map[string]any { return call(t, pl, "mempalace_"+tool, args) }
	for i := range n {
		first, now := long(fmt.Sprintf("note %d", i), size), long(fmt.Sprintf("note %d, updated", i), size)
		fileAndUpdate(t, local, first, now)
		if i%3 != 0 { // the edge replicated the update: the primary holds it by its id
			fileAndUpdate(t, remote, first, now)
		}
	}
	p.save(t)
	c := config(t, p, &primary{pl, srv})
	c.ChildEnv = append(c.ChildEnv, fmt.Sprintf("FAKEPALACE_MAX_ANSWER=%d", capBytes))
	rep := run(t, c, Options{Verify: All})
	if !rep.OK() || rep.Sent[Drawers] != n/3 || rep.Skipped[Drawers] != n-n/3 || rep.Verified != n || rep.Calls["primary get_drawer"]+rep.Calls["local get_drawer"] != 0 {
		t.Fatalf("sent %v, skipped %v, verified %d, calls %v, failed %d (first %+v), mismatches %+v; want %d sent, %d found on the primary, all verified, in batches (no get_drawer one by one)",
			rep.Sent, rep.Skipped, rep.Verified, rep.Calls, len(rep.Failed), rep.Failed[:min(1, len(rep.Failed))], rep.Mismatches, n/3, n-n/3)
	}
}

// A batch is read again in halves only when its call may have failed for
// its answer's size: one the side never got (not sent: the primary is
// down), or that ran out of time, fails its ids at once, one call, not
// one per id.
func TestReaderSplitsOnlyWhatMayBeTooLarge(t *testing.T) {
	t.Parallel()
	ids := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		err   error
		calls int
	}{
		{errors.New("tools/call: the primary's answer is not a JSON-RPC response to it"), 9}, // 5, 2+3, 1+1, 1+2, 1+1
		{fmt.Errorf("primary unreachable: %w", outbox.ErrNotSent), 1},
		{fmt.Errorf("tools/call: %w", context.DeadlineExceeded), 1},
	} {
		calls := 0
		r := &reader{c: callerFunc(func(context.Context, string, map[string]any) (map[string]any, error) { calls++; return nil, tc.err }), side: "primary"}
		got := r.read(context.Background(), ids)
		for _, id := range ids {
			if d := got[id]; !errors.Is(d.err, tc.err) {
				t.Errorf("%v: %s read as %+v, want the call's error", tc.err, id, d)
			}
		}
		if calls != tc.calls {
			t.Errorf("%v: %d calls, want %d", tc.err, calls, tc.calls)
		}
	}
}
