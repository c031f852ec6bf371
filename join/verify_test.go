package join

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// --verify reads both sides 500 ids a call (get_drawers), not one
// get_drawer per record: verifying 15,000 records behind a gateway is 60
// reads, not 30,000; the join reads the local palace's drawers so too.
// Palaces before 3.11.0 (no get_drawers) are read one by one, as before,
// with the same verdicts. Batches of 5 here (Options.batch): 6 records
// cross a batch's end as 501 cross 500's.
func TestJoinVerifiesInBatches(t *testing.T) {
	t.Parallel()
	const batch, n = 5, 6
	for _, version := range []string{"", "3.10.0"} {
		p := newPalace(t)
		for i := range n {
			p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("note %d", i)})
		}
		p.save(t)
		pl, srv := primaryAt(t, version)
		c := config(t, p, &primary{pl, srv})
		// two batches to read the local palace, two to verify
		want := map[string]int{"primary get_drawers": 2, "primary get_drawer": 0, "local get_drawers": 4, "local get_drawer": 0}
		if version != "" {
			c.Child = append(c.Child, "--release", version)
			// refused once, then one by one (locally once to read, once to
			// verify)
			want["primary get_drawers"], want["primary get_drawer"], want["local get_drawers"], want["local get_drawer"] = 1, n, 2, 2*n
		}
		rep := run(t, c, Options{Verify: All, batch: batch})
		for k, v := range want {
			if rep.Calls[k] != v {
				t.Errorf("release %q: %s %d, want %d", version, k, rep.Calls[k], v)
			}
		}
		if !rep.OK() || rep.Verified != n {
			t.Errorf("release %q: verified %d of %d, failed %+v, mismatches %+v", version, rep.Verified, n, rep.Failed, rep.Mismatches)
		}
	}
}

// A batch answer settles each of its records by what it says of that
// record: one left out of the answer (a gateway withholding it) or
// answered with an error is missing on the primary, never passed; a batch
// whose call fails fails each of its records with that error.
func TestVerifyBatchAnswers(t *testing.T) {
	t.Parallel()
	local, remote := newPalace(t), newPalace(t)
	var ts []verifyTarget
	for i := range 3 {
		args := map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("note %d", i)}
		id := local.do(t, "add_drawer", args)["drawer_id"].(string)
		remote.do(t, "add_drawer", args)
		ts = append(ts, verifyTarget{rec: Record{Kind: Drawers, LocalID: id, Wing: "project", Content: args["content"].(string)}, primaryID: id})
	}
	ts = append(ts, verifyTarget{rec: Record{Kind: Drawers, LocalID: ts[0].rec.LocalID, Wing: "project"}, primaryID: "drawer_project_notes_gone"})
	withheld := ts[1].primaryID
	primary := callerFunc(func(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
		res := call(t, remote.pl, tool, args)
		if items, ok := res["results"].([]any); ok {
			var kept []any
			for _, x := range items {
				if x.(map[string]any)["drawer_id"] != withheld {
					kept = append(kept, x)
				}
			}
			res["results"] = kept
		}
		return res, nil
	})
	localSide := func() *reader {
		return &reader{c: callerFunc(func(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
			return call(t, local.pl, tool, args), nil
		}), side: "local"}
	}
	v, ms, fs := verify(context.Background(), localSide(), &reader{c: primary, side: "primary"}, ts, nil)
	missing := map[string]bool{}
	for _, m := range ms {
		if m.Verdict == "missing" {
			missing[m.PrimaryID] = true
		}
	}
	if v != 2 || len(ms) != 2 || !missing[withheld] || !missing["drawer_project_notes_gone"] || len(fs) != 0 {
		t.Fatalf("verified %d, mismatches %+v, failed %+v; want 2 verified, the withheld and the unknown drawer missing", v, ms, fs)
	}

	lost := errors.New("connection reset by peer")
	broken := callerFunc(func(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
		if tool == "mempalace_get_drawers" {
			return nil, lost
		}
		return call(t, remote.pl, tool, args), nil
	})
	v, ms, fs = verify(context.Background(), localSide(), &reader{c: broken, side: "primary"}, ts[:3], nil)
	if v != 0 || len(ms) != 0 || len(fs) != 3 {
		t.Fatalf("a failed batch: verified %d, mismatches %+v, failed %+v; want its 3 records failed", v, ms, fs)
	}
	for i, f := range fs {
		if f.Record != ts[i].rec.LocalID || !strings.Contains(f.Error, lost.Error()) {
			t.Errorf("failure %+v: want record %s with the batch's error", f, ts[i].rec.LocalID)
		}
	}
}

// callerFunc is a Caller.
type callerFunc func(ctx context.Context, tool string, args map[string]any) (map[string]any, error)

func (f callerFunc) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	return f(ctx, tool, args)
}

// primaryAt is a primary playing release version ("": the default).
func primaryAt(t *testing.T, version string) (*fakepalace.Palace, *fakepalace.HTTPServer) {
	return testbed.Primary(t, fakepalace.Options{Version: version}, fakepalace.HTTPOptions{Token: testToken})
}
