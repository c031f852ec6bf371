package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

type rig struct {
	t       *testing.T
	store   *outbox.Store
	primary *fakepalace.Palace
	srv     *fakepalace.HTTPServer
	flusher *outbox.Flusher
	p       *edge.Primary
}

func newRig(t *testing.T) *rig {
	t.Helper()
	pl, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "t"})
	s, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.sqlite"), "dev-1", "lab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	log := slog.New(slog.DiscardHandler)
	p := edge.NewPrimary(srv.URL(), func() string { return "t" }, log, edge.PrimaryOptions{Timeout: 2 * time.Second, Probe: 10 * time.Millisecond, OnUp: func() { s.Resume(context.Background()) }})
	t.Cleanup(p.Close)
	return &rig{t: t, store: s, primary: pl, srv: srv, p: p, flusher: &outbox.Flusher{S: s, P: edge.FlushTarget(p), Log: log, BaseDelay: time.Millisecond}}
}

func (r *rig) enqueue(tool string, args map[string]any) outbox.Op {
	r.t.Helper()
	b, _ := json.Marshal(args)
	op, err := r.store.Enqueue(context.Background(), outbox.Write{Name: "mempalace_" + tool, Payload: b})
	if err != nil {
		r.t.Fatal(err)
	}
	return op
}

// drain flushes until nothing is queued, riding out the breaker that an
// ambiguous failure opens.
func (r *rig) drain() {
	r.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if !r.p.Up() {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		r.store.Resume(ctx)
		r.flusher.Drain(ctx)
		st, _ := r.store.Stats(ctx)
		if st.ByState[outbox.Queued]+st.ByState[outbox.Inflight] == 0 {
			if st.ByState[outbox.Dead] > 0 {
				r.t.Fatalf("dead ops: %+v", st.Dead)
			}
			return
		}
	}
	st, _ := r.store.Stats(ctx)
	r.t.Fatalf("outbox did not drain: %+v", st)
}

func TestReplayTableAgainstApplyThenDrop(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("chunked content ", 120) // > 800 chars: several chunks
	cases := []struct {
		name  string
		tool  string       // the write whose first send lands and loses its answer
		setup func(r *rig) // on the primary, before
		ops   func(r *rig)
		check func(t *testing.T, st *fakepalace.State)
	}{
		{"add_drawer", "mempalace_add_drawer", nil, func(r *rig) {
			r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "small"})
			r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": long})
		}, func(t *testing.T, st *fakepalace.State) {
			if len(st.Drawers) != 2 {
				t.Fatalf("%d drawers", len(st.Drawers))
			}
		}},
		{"checkpoint", "mempalace_checkpoint", nil, func(r *rig) {
			r.enqueue("checkpoint", map[string]any{"items": []any{map[string]any{"wing": "w", "room": "r", "content": "checkpoint item one"}}})
		}, func(t *testing.T, st *fakepalace.State) {
			if len(st.Drawers) != 1 {
				t.Fatalf("%d drawers", len(st.Drawers))
			}
		}},
		{"checkpoint with a diary", "mempalace_checkpoint", nil, func(r *rig) {
			r.enqueue("checkpoint", map[string]any{
				"items": []any{map[string]any{"wing": "w", "room": "r", "content": "checkpoint item with a diary"}},
				"diary": map[string]any{"agent_name": "opencode", "entry": "the session's diary entry, written once"},
			})
		}, func(t *testing.T, st *fakepalace.State) {
			diaries := 0
			for _, d := range st.Drawers {
				if d.Room == "diary" {
					diaries++
				}
			}
			// the items are content-addressed; the diary half has no guard
			if len(st.Drawers) != 2 || diaries != 1 {
				t.Fatalf("%d drawers, %d of them diary entries; want the item and one diary entry", len(st.Drawers), diaries)
			}
		}},
		{"kg_add open", "mempalace_kg_add", nil, func(r *rig) {
			r.enqueue("kg_add", map[string]any{"subject": "a", "predicate": "p", "object": "b"})
		}, func(t *testing.T, st *fakepalace.State) {
			if len(st.Triples) != 1 {
				t.Fatalf("%d triples", len(st.Triples))
			}
		}},
		{"kg_add closed", "mempalace_kg_add", nil, func(r *rig) {
			r.enqueue("kg_add", map[string]any{"subject": "a", "predicate": "p", "object": "c", "valid_from": "2026-01-01", "valid_to": "2026-02-01"})
		}, func(t *testing.T, st *fakepalace.State) {
			if len(st.Triples) != 1 {
				t.Fatalf("closed fact: %d triples (duplicated on replay?)", len(st.Triples))
			}
		}},
		{"kg_invalidate", "mempalace_kg_invalidate", func(r *rig) {
			r.onPrimary("kg_add", map[string]any{"subject": "a", "predicate": "p", "object": "d"})
		}, func(r *rig) {
			r.enqueue("kg_invalidate", map[string]any{"subject": "a", "predicate": "p", "object": "d", "ended": "2026-03-01"})
		}, func(t *testing.T, st *fakepalace.State) {
			if len(st.Triples) != 1 || st.Triples[0].ValidTo == nil || *st.Triples[0].ValidTo != "2026-03-01" {
				t.Fatalf("invalidate: %+v", st.Triples)
			}
		}},
		{"kg_supersede", "mempalace_kg_supersede", func(r *rig) {
			r.onPrimary("kg_add", map[string]any{"subject": "a", "predicate": "runs_on", "object": "laptop"})
		}, func(r *rig) {
			r.enqueue("kg_supersede", map[string]any{"subject": "a", "predicate": "runs_on", "old_object": "laptop", "new_object": "desktop", "at": "2026-04-01"})
		}, func(t *testing.T, st *fakepalace.State) {
			open := 0
			for _, tr := range st.Triples {
				if tr.ValidTo == nil {
					open++
					if tr.Object != "desktop" {
						t.Fatalf("the wrong fact is open: %+v", tr)
					}
				}
			}
			if len(st.Triples) != 2 || open != 1 {
				t.Fatalf("supersede: %d triples, %d open", len(st.Triples), open)
			}
		}},
		{"diary_write", "mempalace_diary_write", nil, func(r *rig) {
			r.enqueue("diary_write", map[string]any{"agent_name": "opencode", "entry": "a diary entry that must land once"})
		}, func(t *testing.T, st *fakepalace.State) {
			if len(st.Drawers) != 1 {
				t.Fatalf("diary stored %d times", len(st.Drawers))
			}
		}},
		{"update_drawer", "mempalace_update_drawer", func(r *rig) {
			r.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "v1"})
		}, func(r *rig) {
			r.enqueue("update_drawer", map[string]any{"drawer_id": fakepalace.DrawerID("w", "r", "v1"), "content": "v2"})
		}, func(t *testing.T, st *fakepalace.State) {
			for _, d := range st.Drawers {
				if d.Content != "v2" || len(st.Drawers) != 1 {
					t.Fatalf("update: %+v", d)
				}
			}
		}},
		{"event_append", "mempalace_event_append", nil, func(r *rig) {
			r.enqueue("event_append", map[string]any{"type": "task.request", "stream": "s", "room": "r", "from_agent": "opencode@lab", "body": "once"})
		}, func(t *testing.T, st *fakepalace.State) {
			if len(st.Events) != 1 || st.Events[0].Metadata["edge_op_id"] == nil {
				t.Fatalf("events: %d %+v", len(st.Events), st.Events)
			}
		}},
		{"patch_submit", "mempalace_patch_submit", nil, func(r *rig) {
			r.enqueue("patch_submit", map[string]any{"content": "--- a\n+++ b\n", "from_agent": "opencode@lab", "stream": "s"})
		}, func(t *testing.T, st *fakepalace.State) {
			if len(st.Events) != 1 {
				t.Fatalf("patch.ready events: %d", len(st.Events))
			}
		}},
		{"event_ack", "mempalace_event_ack", func(r *rig) {
			r.onPrimary("event_append", map[string]any{"type": "task.request", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": "opencode@lab"})
		}, func(r *rig) {
			id := r.primary.Dump().Events[0].ID
			r.enqueue("event_ack", map[string]any{"event_id": id, "from_agent": "opencode@lab", "status": "applied"})
		}, func(t *testing.T, st *fakepalace.State) {
			acks := 0
			for _, e := range st.Events {
				if e.Type == "event.ack" {
					acks++
				}
			}
			if acks != 1 {
				t.Fatalf("%d acks", acks)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			if c.setup != nil {
				c.setup(r)
			}
			// The write's first send lands on the primary and its answer is
			// lost; the flusher's own look-ups still get answers.
			r.srv.DropAfterApplyTool(c.tool, 1)
			c.ops(r)
			r.drain()
			if got := r.primary.Calls(c.tool); got < 1 {
				t.Fatalf("%s never reached the primary", c.tool)
			}
			c.check(t, r.primary.Dump())
		})
	}
}

func (r *rig) onPrimary(tool string, args map[string]any) {
	r.t.Helper()
	b, _ := json.Marshal(args)
	res, err := edge.FlushTarget(r.p).Call(context.Background(), "mempalace_"+tool, b)
	if err != nil || res["success"] == false {
		r.t.Fatalf("%s on the primary: %v %v", tool, res, err)
	}
}

// local_seq is monotonic and op_ids differ for identical events; an
// identical add_drawer queued twice is one op.
func TestEnqueueIdentity(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	a := r.enqueue("event_append", map[string]any{"type": "x", "stream": "s", "room": "r", "from_agent": "a"})
	b := r.enqueue("event_append", map[string]any{"type": "x", "stream": "s", "room": "r", "from_agent": "a"})
	c := r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "same"})
	d := r.enqueue("add_drawer", map[string]any{"room": "r", "content": "same", "wing": "w"})
	if !(a.LocalSeq < b.LocalSeq && b.LocalSeq < c.LocalSeq) || a.ID == b.ID {
		t.Fatalf("seq/ids: %d %d %d, %s %s", a.LocalSeq, b.LocalSeq, c.LocalSeq, a.ID, b.ID)
	}
	if c.ID != d.ID {
		t.Fatalf("an identical queued add_drawer was enqueued twice: %s %s", c.ID, d.ID)
	}
	var p map[string]any
	json.Unmarshal(a.Payload, &p)
	if p["metadata"].(map[string]any)["edge_op_id"] != a.ID {
		t.Fatalf("event not stamped with its op id: %s", a.Payload)
	}
	want := fmt.Sprint(len(a.ID))
	if want != "64" {
		t.Fatalf("op id %q is not a sha256", a.ID)
	}
}
