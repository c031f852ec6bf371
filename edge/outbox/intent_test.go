package outbox_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// An intent is never sent as it is: the local answer settles it
// (promoted: sent once, an identical one already queued taking its
// place; abandoned: gone), and one a killed edge left is held, for the
// policy to release.
func TestIntentSettledByTheLocalAnswer(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	intendIn := func(s *outbox.Store, content string) outbox.Op {
		b, _ := json.Marshal(map[string]any{"wing": "w", "room": "r", "content": content})
		op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: b, Intent: true})
		if err != nil || op.State != outbox.Intent {
			t.Fatalf("intent: %+v %v", op, err)
		}
		return op
	}
	intend := func(content string) outbox.Op { return intendIn(r.store, content) }
	killed := r.openOther() // an edge killed while its local palace had a write
	left := intendIn(killed, "left by a kill")
	killed.Close()
	taken, refused, twin := intend("taken"), intend("refused"), intend("taken")
	if sent, _ := r.flusher.Drain(ctx); sent != 0 {
		t.Errorf("the flusher sent %d intents", sent)
	}
	if op, err := r.store.Promote(ctx, taken, false, ""); err != nil || op.State != outbox.Queued {
		t.Errorf("promoted: %+v %v", op, err)
	}
	if op, err := r.store.Promote(ctx, twin, false, ""); err != nil || op.ID != taken.ID {
		t.Errorf("an identical write promoted is not the queued one: %+v %v", op, err)
	}
	if ok, err := r.store.Abandon(ctx, refused); !ok || err != nil {
		t.Errorf("abandoned: %v %v", ok, err)
	}
	if n, err := r.store.ResolveIntents(ctx); n != 1 || err != nil {
		t.Errorf("resolved %d intents (%v), want the one left", n, err)
	}
	if op, _ := r.store.Get(ctx, left.LocalSeq); op.State != outbox.Held {
		t.Errorf("an intent a killed edge left: %s, want held", op.State)
	}
	r.settleAll()
	st := r.primary.Dump()
	if st.CountContent("taken") != 1 || st.CountContent("refused") != 0 {
		t.Errorf("on the primary: taken %d (want 1), refused %d (want 0)", st.CountContent("taken"), st.CountContent("refused"))
	}
	if _, err := r.store.Get(ctx, refused.LocalSeq); err == nil {
		t.Error("the refused write's intent is still in the outbox")
	}
}

// A delete is in the outbox before the local palace gets it. Left by a
// killed edge, it is kept by the next (ResolveIntents): its tombstone
// stays and the unsent add of the drawer it deletes is cancelled, never
// sent. Refused, it takes back the tombstones it added, not one an
// earlier delete left.
func TestADeleteIntentKeptOrTakenBack(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	add, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"notes","room":"r","content":"api key pasted by mistake"}`)})
	if err != nil {
		t.Fatal(err)
	}
	mark := func(key string) outbox.Tombstone { return outbox.Tombstone{Kind: outbox.TombDrawer, Key: key} }
	killed := catalogue.DrawerID("notes", "r", "api key pasted by mistake")
	call := []byte(`{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"` + killed + `"}}`)
	k, err := outbox.Open(s.Path(), "dev", "lab") // an edge killed while its local palace had the delete
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.IntendDelete(ctx, []outbox.Tombstone{mark(killed)}, nil, nil, "", call); err != nil {
		t.Fatal(err)
	}
	k.Close()
	if n, err := s.ResolveIntents(ctx); n != 1 || err != nil {
		t.Errorf("resolved %d (%v), want the delete left", n, err)
	}
	// Whether the local palace applied it is not known: it is to be sent there again.
	if us, err := s.Unapplied(ctx); err != nil || len(us) != 1 || string(us[0].Call) != string(call) {
		t.Errorf("unapplied after a killed edge's delete: %+v %v, want its local call", us, err)
	} else if err := s.DropUnapplied(ctx, us[0].Key); err != nil {
		t.Fatal(err)
	}
	if us, err := s.Unapplied(ctx); err != nil || len(us) != 0 {
		t.Errorf("unapplied after it was dropped: %+v %v", us, err)
	}
	if o, _ := s.Get(ctx, add.LocalSeq); o.State != outbox.Done {
		t.Errorf("the unsent add of a drawer a killed edge's delete removed: %s, want done (cancelled)", o.State)
	}
	if n, err := s.ResolveIntents(ctx); n != 0 || err != nil {
		t.Errorf("resolved %d (%v) again, want none", n, err)
	}
	if err := s.AddTombstones(ctx, []outbox.Tombstone{mark("drawer_earlier")}); err != nil {
		t.Fatal(err)
	}
	p, err := s.IntendDelete(ctx, []outbox.Tombstone{mark("drawer_earlier"), mark("drawer_refused")}, nil, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRefused(ctx, p); err != nil {
		t.Fatal(err)
	}
	var keys []string
	ts, _ := s.Tombstones(ctx)
	for _, x := range ts {
		keys = append(keys, x.Key)
	}
	slices.Sort(keys)
	if want := []string{"drawer_earlier", killed}; !slices.Equal(keys, want) {
		t.Errorf("tombstones: %v, want %v", keys, want)
	}
	if n, _ := s.ResolveIntents(ctx); n != 0 {
		t.Errorf("a refused delete's note was left: %d resolved", n)
	}
}

// Two edges on one palace, the first's liveness not known (an older
// build, or a volume without file locks; here its lock is let go): the
// second takes the first's pending intent for one a killed edge left and
// sends it; the primary refuses it (it is queued again, for a retry).
// When the first edge's local palace then refuses the write too, it is
// taken back, but Abandon says it had gone out (false), so the edge logs
// the line docs/replication.md promises.
func TestAnIntentSentByAnotherEdgeThenRefusedLocallySaysItWasSent(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	first := r.openOther()
	op, err := first.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":""}`), Intent: true})
	if err != nil {
		t.Fatal(err)
	}
	first.Close() // its lock let go: its liveness is not known
	if n, err := r.store.ResolveIntents(ctx); n != 1 || err != nil {
		t.Fatalf("resolved %d (%v)", n, err)
	}
	held, _ := r.store.Get(ctx, op.LocalSeq)
	if err := r.store.Release(ctx, held, json.RawMessage(held.Payload), true); err != nil {
		t.Fatal(err)
	}
	r.flusher.MaxRefusals = 5
	if _, err := r.flusher.Drain(ctx); err != nil {
		t.Log(err)
	}
	sent, _ := r.store.Get(ctx, op.LocalSeq)
	if sent.Attempts == 0 {
		t.Fatalf("the other edge never sent it: %+v", sent)
	}
	if ok, err := r.store.Abandon(ctx, op); ok || err != nil {
		t.Errorf("Abandon of a write another edge already sent (state %s, %d attempt(s)) says it never went out (%v, %v): the edge logs nothing", sent.State, sent.Attempts, ok, err)
	}
	// Taken back (done), or dead when the other edge's flusher met the
	// refusal MaxRefusals times first (a slow run, the race detector's):
	// either way it is never sent again.
	if got, _ := r.store.Get(ctx, op.LocalSeq); got.State != outbox.Done && got.State != outbox.Dead {
		t.Errorf("a sent write both palaces refused is %s, want done (taken back) or dead: it would be sent again", got.State)
	}
}

// A write of a drawer (or source) a kept delete has not yet removed from
// the local palace supersedes it there: a delete_drawers loses that id and
// keeps the rest; a delete of nothing else goes.
func TestARewriteSupersedesAnUnappliedDelete(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, call := range []string{
		`{"name":"mempalace_delete_drawers","arguments":{"drawer_ids":["a","b"]}}`,
		`{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"a"}}`,
		`{"name":"mempalace_delete_by_source","arguments":{"source_file":"notes.md","dry_run":false}}`,
		`{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"c"}}`,
	} {
		p, err := s.IntendDelete(ctx, nil, nil, nil, "", []byte(call))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteUnapplied(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.LiftTombstones(ctx, []string{"a"}, map[string][]string{"notes.md": {"drawer_n"}}, "", nil); err != nil {
		t.Fatal(err)
	}
	us, err := s.Unapplied(ctx)
	var calls []string
	for _, u := range us {
		calls = append(calls, string(u.Call))
	}
	slices.Sort(calls)
	want := []string{`{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"c"}}`, `{"name":"mempalace_delete_drawers","arguments":{"drawer_ids":["b"]}}`}
	if err != nil || !slices.Equal(calls, want) {
		t.Errorf("kept deletes after a rewrite of a and notes.md: %q %v, want %q", calls, err, want)
	}
}

// A delete_by_source left by a killed edge, whose source has (by base
// name) a drawer with an unsent update_drawer: the next edge keeps the
// delete, and holds the update, sent by no flusher, until its local
// palace has answered the delete sent again: MemPalace matches the full
// path, so /work/b/runbook.md's drawer may stay, and its edit must then
// reach the primary. Before, the update was cancelled at once: an edit of
// a drawer the delete left was lost for every other device.
func TestAKilledDeleteBySourceHoldsTheUnsentUpdate(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s, ctx := r.store, context.Background()
	id := catalogue.DrawerID("notes", "src", "deploy notes")
	r.enqueue("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": "deploy notes", "source_file": "/work/b/runbook.md"})
	if n, err := r.flusher.Drain(ctx); n != 1 || err != nil {
		t.Fatalf("the drawer's add: sent %d, %v", n, err)
	}
	upd := r.enqueue("update_drawer", map[string]any{"drawer_id": id, "content": "deploy notes, new steps"})
	k, err := outbox.Open(s.Path(), "dev", "lab") // an edge killed while its local palace had the delete
	if err != nil {
		t.Fatal(err)
	}
	call := []byte(`{"name":"mempalace_delete_by_source","arguments":{"source_file":"/work/a/runbook.md","dry_run":false}}`)
	if _, err := k.IntendDelete(ctx, []outbox.Tombstone{{Kind: outbox.TombSource, Key: "/work/a/runbook.md"}}, nil, []string{id}, "", call); err != nil {
		t.Fatal(err)
	}
	k.Close()
	if n, err := s.ResolveIntents(ctx); n != 1 || err != nil {
		t.Errorf("resolved %d (%v), want the delete left", n, err)
	}
	if n, err := r.flusher.Drain(ctx); n != 0 || err != nil {
		t.Errorf("before the local palace's answer: sent %d (%v), want the update held", n, err)
	}
	if o, _ := s.Get(ctx, upd.LocalSeq); o.State != outbox.Queued {
		t.Fatalf("the held update: %s, want queued", o.State)
	}
	us, err := s.Unapplied(ctx)
	if err != nil || len(us) != 1 {
		t.Fatalf("kept deletes %+v (%v), want one", us, err)
	}
	if err := s.DropUnapplied(ctx, us[0].Key); err != nil { // applied: the drawer was left
		t.Fatal(err)
	}
	if n, err := r.flusher.Drain(ctx); n != 1 || err != nil {
		t.Errorf("once the delete is settled: sent %d (%v), want the update", n, err)
	}
}

// A kept delete_by_source whose source is written again is not sent to
// the local palace again (it would remove the new write), but a note that
// holds updates stays, without its call: the next edge still finds which
// drawers it removed before their updates go.
func TestASupersededDeleteBySourceStillHoldsItsUpdates(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	call := []byte(`{"name":"mempalace_delete_by_source","arguments":{"source_file":"/work/a/README.md","dry_run":false}}`)
	p, err := s.IntendDelete(ctx, nil, nil, []string{"drawer_b"}, "", call)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUnapplied(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.SupersedeUnapplied(ctx, nil, []string{"/work/a/README.md"}); err != nil {
		t.Fatal(err)
	}
	us, err := s.Unapplied(ctx)
	if err != nil || len(us) != 1 || len(us[0].Call) != 0 || !slices.Equal(us[0].Updated, []string{"drawer_b"}) {
		t.Errorf("kept deletes after a rewrite of the source: %+v (%v), want one holding drawer_b, with no call", us, err)
	}
}

// An admin device's delete_by_source kept without the local palace's
// answer (a stop, a kill) is queued for the primary while the update of
// one of its drawers, edited offline, is held. The next edge finds the
// local palace removed that drawer: the update is cancelled and the
// primary's copy hidden until the delete lands there. Once it has landed,
// nothing of it stays hidden: the same text filed again on the primary
// later (by another device) shows on this device. Before, the next edge's
// tombstone of the drawer was tied to no op, so it outlived the delete and
// hid the drawer from this device for good. Whether the delete lands
// before or after the next edge settles it, no tombstone is left.
func TestTheDrawersAKeptDeleteRemovedShowAgainOnceItLands(t *testing.T) {
	t.Parallel()
	for _, landsFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "settled before it lands", true: "landed before it is settled"}[landsFirst], func(t *testing.T) {
			r := newRig(t)
			s, ctx := r.store, context.Background()
			const src = "/work/a/runbook.md"
			id := catalogue.DrawerID("notes", "src", "deploy notes")
			r.enqueue("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": "deploy notes", "source_file": src})
			r.drain()
			upd := r.enqueue("update_drawer", map[string]any{"drawer_id": id, "content": "deploy notes, edited offline"})
			del := r.enqueue("delete_by_source", map[string]any{"source_file": src, "dry_run": false})
			call := []byte(`{"name":"mempalace_delete_by_source","arguments":{"source_file":"` + src + `","dry_run":false}}`)
			p, err := s.IntendDelete(ctx, []outbox.Tombstone{{Kind: outbox.TombSource, Key: src}}, nil, []string{id}, del.ID, call)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteUnapplied(ctx, p); err != nil {
				t.Fatal(err)
			}
			if landsFirst {
				if n, err := r.flusher.Drain(ctx); n != 1 || err != nil { // the update held
					t.Fatalf("sent %d (%v), want the delete alone", n, err)
				}
			}
			us, err := s.Unapplied(ctx)
			if err != nil || len(us) != 1 {
				t.Fatalf("kept deletes %+v (%v), want one", us, err)
			}
			// The next edge: the local palace answered the delete sent
			// again, and no longer holds the drawer.
			if err := s.KeptRemoved(ctx, us[0], []string{id}); err != nil {
				t.Fatal(err)
			}
			if err := s.DropUnapplied(ctx, us[0].Key); err != nil {
				t.Fatal(err)
			}
			if !landsFirst {
				if !hidden(t, s, id) {
					t.Error("before the delete lands, the primary's copy of the drawer it removed is not hidden")
				}
				r.drain()
			}
			if o, _ := s.Get(ctx, upd.LocalSeq); o.State != outbox.Done || o.FlushedAt != nil && len(o.Result) > 0 {
				t.Errorf("the update of the removed drawer: %s, result %s; want cancelled, never sent", o.State, o.Result)
			}
			if r.primary.Dump().Drawers[id] != nil {
				t.Fatal("the delete did not land on the primary")
			}
			if hidden(t, s, id) {
				t.Error("after the delete landed, the drawer it removed is still hidden: the same text filed again would never show on this device")
			}
		})
	}
}

// hidden reports a drawer tombstone for id.
func hidden(t *testing.T, s *outbox.Store, id string) bool {
	t.Helper()
	ts, err := s.Tombstones(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(ts, func(x outbox.Tombstone) bool { return x.Kind == outbox.TombDrawer && x.Key == id })
}
