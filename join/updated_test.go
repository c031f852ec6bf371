package join

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// fileAndUpdate files content in the palace behind do and updates it to
// update (MemPalace keeps the first id): the drawer's id.
func fileAndUpdate(t *testing.T, do func(tool string, args map[string]any) map[string]any, content, update string) string {
	t.Helper()
	id, _ := do("add_drawer", map[string]any{"wing": "project", "room": "notes", "content": content})["drawer_id"].(string)
	if update == "" {
		return id
	}
	if res := do("update_drawer", map[string]any{"drawer_id": id, "content": update}); res["success"] != true || res["drawer_id"] != id {
		t.Fatalf("update_drawer %s: %v", id, res)
	}
	return id
}

// A drawer the device filed and updated (the edge replicated both; the
// primary holds it under its first id), which an admin then deleted, and
// one the device edited offline while an admin deleted it: the join's add
// of their current content names another id than the one the trash holds
// them under. Neither is filed again; both are counted as deleted on the
// primary (attack17 n1).
func TestJoinDoesNotRefileAnUpdatedDrawerAnAdminDeleted(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens, p := updatedThenDeleted(t)
	c := config(t, p, pr)
	c.URL, c.Token, c.Device = url, func() string { return tokens["desk-9b21"] }, "desk-9b21"
	for _, which := range []string{"first", "second"} {
		rep := run(t, c, Options{Verify: All})
		if !rep.OK() || rep.DeletedOnPrimary[Drawers] != 2 || rep.Sent[Drawers] != 0 {
			t.Fatalf("%s join: deleted on the primary %v, sent %v, failed %+v, mismatches %+v; want both drawers deleted on the primary", which, rep.DeletedOnPrimary, rep.Sent, rep.Failed, rep.Mismatches)
		}
		if st := pr.pl.Dump(); len(st.Drawers) != 0 {
			t.Fatalf("%s join: the primary holds %d drawers again (%v)", which, len(st.Drawers), st.Drawers)
		}
		c.Device = "" // a later join that sends everything again (its writes differ)
	}
}

// A join that queued the updated drawers and was refused (a device that
// may not write the wing), then resumed as one that may: the resumed
// run, which reads nothing of the local palace, still names each drawer's
// local id, and neither is filed again.
func TestJoinResumedNamesTheLocalID(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens, p := updatedThenDeleted(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["reader-77"] }
	if rep := run(t, c, Options{}); len(rep.Failed) != 2 {
		t.Fatalf("a join of a device that may not write the wing: failed %+v, want both drawers refused", rep.Failed)
	}
	c.Token = func() string { return tokens["desk-9b21"] }
	rep := run(t, c, Options{Resume: true})
	if rep.DeletedOnPrimary[Drawers] != 2 || len(pr.pl.Dump().Drawers) != 0 {
		t.Fatalf("the resumed join: deleted on the primary %v, failed %+v; the primary holds %v", rep.DeletedOnPrimary, rep.Failed, pr.pl.Dump().Drawers)
	}
}

// updatedThenDeleted is a gateway (devices desk-9b21, reader-77 that may
// not write project, admin ops-0001) in front of a primary, and a local
// palace, each holding a drawer filed and updated (the edge replicated
// both) and one filed (the local palace's copy edited offline since),
// both of which the admin deleted on the primary.
func updatedThenDeleted(t *testing.T) (*primary, string, map[string]string, *palace) {
	t.Helper()
	pr, url, tokens := frontGateway(t, []gateway.Device{
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project", "wing_*"}, KG: "write", Agents: []string{"opencode@desk"}},
		{ID: "reader-77", Label: "reader", Read: []string{"*"}, Write: []string{"wing_*"}, KG: "write", Agents: []string{"opencode@reader"}},
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
	})
	p := newPalace(t)
	local := func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }
	live := func(tool string, args map[string]any) map[string]any {
		return gwCall(t, url, tokens["desk-9b21"], tool, args)
	}
	rewritten, offline := "the rewritten text the admin removed", "the device's offline edit"
	ids := []string{fileAndUpdate(t, local, "first draft", rewritten), fileAndUpdate(t, local, "a note deleted meanwhile", offline)}
	if got := []string{fileAndUpdate(t, live, "first draft", rewritten), fileAndUpdate(t, live, "a note deleted meanwhile", "")}; got[0] != ids[0] || got[1] != ids[1] {
		t.Fatalf("the primary's ids %v, the local palace's %v", got, ids)
	}
	for _, id := range ids {
		if res := gwCall(t, url, tokens["ops-0001"], "delete_drawer", map[string]any{"drawer_id": id}); res["success"] != true {
			t.Fatalf("the admin's delete of %s: %v", id, res)
		}
	}
	p.save(t)
	return pr, url, tokens, p
}

// A drawer filed and updated, both replicated: the primary holds it under
// its first id with the new content. A join does not file it again under
// the id its content gives (a duplicate); it is there. One whose update
// did not reach the primary (it holds the first version) is not filed
// again either, and the join names it: the primary holds another version.
func TestJoinDoesNotDuplicateAnUpdatedDrawer(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	local := func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }
	remote := func(tool string, args map[string]any) map[string]any { return call(t, pr.pl, "mempalace_"+tool, args) }
	fileAndUpdate(t, local, "first draft", "the text as it is now")
	stale := fileAndUpdate(t, local, "a note", "a note, edited since")
	fileAndUpdate(t, local, "a plain note", "")
	fileAndUpdate(t, remote, "first draft", "the text as it is now")
	fileAndUpdate(t, remote, "a note", "")
	p.save(t)
	c := config(t, p, pr)
	for _, which := range []string{"first", "second"} {
		rep := run(t, c, Options{Verify: All})
		contents := map[string]int{}
		for _, d := range pr.pl.Dump().Drawers {
			contents[d.Content]++
		}
		if len(contents) != 3 || contents["the text as it is now"] != 1 || contents["a note, edited since"] != 0 || contents["a note"] != 1 {
			t.Fatalf("%s join: the primary holds %v; want the updated drawer once, the stale one as it was, and the plain note", which, contents)
		}
		if len(rep.Mismatches) != 1 || rep.Mismatches[0].LocalID != stale || rep.Mismatches[0].Verdict != "edited" || len(rep.Failed) != 0 {
			t.Errorf("%s join: mismatches %+v, failed %+v; want the stale drawer named as edited", which, rep.Mismatches, rep.Failed)
		}
		if which == "first" && (rep.Sent[Drawers] != 1 || rep.Skipped[Drawers] != 1) {
			t.Errorf("%s join: sent %v, skipped %v; want the plain note sent and the updated drawer skipped (on the primary)", which, rep.Sent, rep.Skipped)
		}
	}
}

// Against real MemPalace 3.11.0 on both sides: a drawer filed and updated
// on both (as the edge replicates an update) is not filed again by a join
// under the id its new content gives, nor counted as to send by a dry run.
func TestRealJoinDoesNotDuplicateAnUpdatedDrawer(t *testing.T) {
	t.Parallel()
	localPalace := realpalace.New(t)
	s := localPalace.Stdio(t)
	srv := realpalace.New(t).Serve(t, "tok-join-updated")
	now := "rotate the staging keys every month"
	var ids []string
	for _, c := range []interface {
		MustCall(testing.TB, string, map[string]any) map[string]any
	}{s, srv} {
		ids = append(ids, fileAndUpdate(t, func(tool string, args map[string]any) map[string]any { return c.MustCall(t, "mempalace_"+tool, args) }, "rotate the staging keys every quarter", now))
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if ids[0] != ids[1] {
		t.Fatalf("ids differ: %v", ids)
	}
	// A dry run asks the same: nothing to send.
	if rep := run(t, realConfig(localPalace, srv), Options{DryRun: true}); rep.Pending[Drawers] != 0 || rep.Skipped[Drawers] != 1 || rep.Calls["primary get_drawers"] != 1 || !rep.OK() {
		t.Fatalf("dry run: to send %v, skipped %v, calls %v, failed %+v, mismatches %+v; want the drawer found on the primary", rep.Pending, rep.Skipped, rep.Calls, rep.Failed, rep.Mismatches)
	}
	rep := run(t, realConfig(localPalace, srv), Options{Verify: All})
	// One get_drawers looks it up, one verifies it.
	if !rep.OK() || rep.Calls["primary add_drawer"] != 0 || rep.Calls["primary get_drawers"] != 2 || rep.Calls["primary get_drawer"] != 0 || rep.Verified != 1 {
		t.Fatalf("join: ok %v, calls %v, failed %+v, mismatches %+v", rep.OK(), rep.Calls, rep.Failed, rep.Mismatches)
	}
	page := srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "project", "limit": 100})
	if rows, _ := page["drawers"].([]any); len(rows) != 1 {
		t.Fatalf("the primary holds %d drawers in project, want the updated one alone: %v", len(rows), page)
	}
}

// More updated drawers than a gateway's read burst (100), in front of a
// primary without get_drawers (MemPalace before 3.11.0): the look-ups by
// local id, one get_drawer each, wait out the device's read rate (-32029)
// instead of failing the drawers, and every one is sent. It waits on the
// rate: not in the unit tier.
func TestJoinLooksUpUpdatedDrawersWithinTheReadRate(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a gateway's read rate")
	}
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens := gatewayFrontOf(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"project"}, Write: []string{"project"}, KG: "write", Agents: []string{"opencode@desk"}, ReadRate: 50, WriteRate: 1000}}, false, fakepalace.Options{Version: "3.10.0"})
	p := newPalace(t)
	local := func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }
	const n = 125
	for i := range n {
		fileAndUpdate(t, local, fmt.Sprintf("note %d", i), fmt.Sprintf("note %d, updated", i))
	}
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	rep := run(t, c, Options{})
	if !rep.OK() || rep.Sent[Drawers] != n || rep.Calls["primary get_drawer"] <= n {
		t.Fatalf("sent %v, get_drawer calls %d, failed %d (first %+v); want all %d sent after waiting out the read rate", rep.Sent, rep.Calls["primary get_drawer"], len(rep.Failed), rep.Failed[:min(1, len(rep.Failed))], n)
	}
}

// A join through a gateway that verifies every record, more of them than
// the device's read burst (100), in front of a primary without
// get_drawers (before 3.11.0): each verification's get_drawer waits out
// the read rate (-32029) instead of failing the record, and every one is
// verified. It waits on the rate (about 2 s): not in the unit tier. A
// device that does not read every wing, in front of 3.11.0, verifies in
// get_drawers batches (TestNarrowDeviceJoinsInBatches).
func TestJoinVerifiesWithinTheReadRate(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a gateway's read rate")
	}
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens := gatewayFrontOf(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"project"}, Write: []string{"project"}, KG: "write", Agents: []string{"opencode@desk"}, ReadRate: 50, WriteRate: 1000}}, false, fakepalace.Options{Version: "3.10.0"})
	p := newPalace(t)
	const n = 200
	for i := range n {
		p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("note %d", i)})
	}
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	rep := run(t, c, Options{Verify: All})
	if !rep.OK() || rep.Verified != n || rep.Calls["primary get_drawer"] <= n {
		t.Fatalf("verified %d, get_drawer calls %d, failed %d (first %+v); want all %d verified after waiting out the read rate", rep.Verified, rep.Calls["primary get_drawer"], len(rep.Failed), rep.Failed[:min(1, len(rep.Failed))], n)
	}
}

// A device that reads only some wings looks up its updated drawers and
// verifies every record through a gateway in get_drawers batches (the
// gateway cuts their answers by wing), not one get_drawer per record, so
// a join stays inside the device's read burst: 200 records, 125 of them
// updated, in two calls.
func TestNarrowDeviceJoinsInBatches(t *testing.T) {
	t.Parallel()
	pr, url, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"project"}, Write: []string{"project"}, KG: "write", Agents: []string{"opencode@desk"}, WriteRate: 1000}})
	p := newPalace(t)
	local := func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }
	for i := range 200 {
		if i < 125 {
			fileAndUpdate(t, local, fmt.Sprintf("note %d", i), fmt.Sprintf("note %d, updated", i))
			continue
		}
		p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("note %d", i)})
	}
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	rep := run(t, c, Options{Verify: All})
	if !rep.OK() || rep.Verified != 200 || rep.Calls["primary get_drawer"] != 0 || rep.Calls["primary get_drawers"] != 2 {
		t.Fatalf("verified %d, calls %v, failed %d (first %+v); want all 200 verified in two get_drawers (one looks the updated ones up)", rep.Verified, rep.Calls, len(rep.Failed), rep.Failed[:min(1, len(rep.Failed))])
	}
}

// The look-ups of updated (or mined) drawers by their local id take one
// get_drawers per 500 (MemPalace's cap), not one get_drawer each: a mined
// palace's first join does not pay a read per drawer. Batches of 5 here
// (Options.batch): 6 drawers cross a batch's end as 501 cross 500's.
func TestJoinLooksUpUpdatedDrawersInBatches(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	local := func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }
	const batch, n = 5, 6
	for i := range n {
		fileAndUpdate(t, local, fmt.Sprintf("note %d", i), fmt.Sprintf("note %d, updated", i))
	}
	p.save(t)
	rep := run(t, config(t, p, pr), Options{batch: batch})
	if !rep.OK() || rep.Sent[Drawers] != n || rep.Calls["primary get_drawers"] != 2 || rep.Calls["primary get_drawer"] != 0 {
		t.Fatalf("sent %v, calls %v, failed %d; want all %d sent after two get_drawers", rep.Sent, rep.Calls, len(rep.Failed), n)
	}
}

// A dry run asks the primary what a real join asks it before queuing,
// read-only: each drawer updated since it was filed, by its id. One there
// with the same content is not to send (skipped), one there with other
// content is named edited, as a real join names it; one not there is to
// send. Nothing is written: not to the primary, not a join outbox, not
// the one an earlier join left, not bootstrap.json. Without a token
// nothing is asked, and a note says so.
func TestJoinDryRunLooksUpUpdatedDrawers(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	local := func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }
	remote := func(tool string, args map[string]any) map[string]any { return call(t, pr.pl, "mempalace_"+tool, args) }
	fileAndUpdate(t, local, "first draft", "the text as it is now")
	stale := fileAndUpdate(t, local, "a note", "a note, edited since")
	fileAndUpdate(t, local, "never sent", "never sent, updated since")
	fileAndUpdate(t, local, "a plain note", "")
	fileAndUpdate(t, remote, "first draft", "the text as it is now")
	fileAndUpdate(t, remote, "a note", "")
	p.save(t)
	c := config(t, p, pr)
	filed := writes(pr)
	rep := run(t, c, Options{DryRun: true})
	if rep.Pending[Drawers] != 2 || rep.Skipped[Drawers] != 1 || rep.Calls["primary get_drawers"] != 1 || len(rep.Failed) != 0 {
		t.Errorf("dry run: to send %v, skipped %v, calls %v, failed %+v; want the updated drawer on the primary skipped, two to send, one get_drawers", rep.Pending, rep.Skipped, rep.Calls, rep.Failed)
	}
	if len(rep.Mismatches) != 1 || rep.Mismatches[0].LocalID != stale || rep.Mismatches[0].Verdict != "edited" {
		t.Errorf("dry run: mismatches %+v; want the stale drawer named as edited", rep.Mismatches)
	}
	if writes(pr) != filed || exists(filepath.Join(p.dir, "edge", OutboxFile(rep.Target))) || exists(checkpointPath(p.dir)) {
		t.Fatal("a dry run wrote to the primary, or created the join outbox or bootstrap.json")
	}

	untokened := c
	untokened.Token = nil
	rep = run(t, untokened, Options{DryRun: true})
	if rep.Pending[Drawers] != 4 || len(rep.Mismatches) != 0 || !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "3 drawers updated since") }) {
		t.Errorf("a dry run without a token: to send %v, mismatches %+v, notes %q; want nothing asked, all four to send, and a note", rep.Pending, rep.Mismatches, rep.Notes)
	}

	// After a join, a drawer updated since: the dry run asks, and writes
	// nothing into the outbox the join left (what the primary is, noted
	// by a real run's calls, stays as it was).
	run(t, c, Options{})
	fileAndUpdate(t, local, "written after the join", "written after the join, updated")
	p.save(t)
	ob := filepath.Join(p.dir, "edge", OutboxFile(rep.Target))
	longAgo := func() time.Time { return time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) }
	noted := protection(t, ob, longAgo, true)
	rep = run(t, c, Options{DryRun: true})
	if rep.Pending[Drawers] != 1 || rep.Calls["primary get_drawers"] != 1 {
		t.Errorf("a dry run after a join: to send %v, calls %v; want the new drawer looked up and to send", rep.Pending, rep.Calls)
	}
	if now := protection(t, ob, nil, false); now != noted {
		t.Errorf("a dry run wrote into the join outbox an earlier join left: %q, was %q", now, noted)
	}
}

// protection is what the join outbox notes of the primary's protection,
// noted first (with the clock now) when note.
func protection(t *testing.T, file string, now func() time.Time, note bool) string {
	t.Helper()
	s, err := outbox.OpenOptions(file, outbox.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if note {
		if err := outbox.RecordProtection(s, true); err != nil {
			t.Fatal(err)
		}
	}
	return s.Protection(context.Background())
}
