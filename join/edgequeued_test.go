package join

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// Attack74 F6: a diary entry the edge's outbox still holds (written
// offline, or before the disk filled) was sent by join as well, and the
// edge then sent its op as a first write: the primary held it twice. The
// join refuses, naming the ops and `edge flush`, and queues nothing; after
// the flush it sends only what the edge did not (the full-disk case: one
// entry queued, one that stayed local). Each entry ends on the primary once.
func TestJoinLeavesTheEdgesQueuedDiaryEntriesToTheEdge(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	queued := map[string]any{"agent_name": "opencode", "entry": "K41 queued offline then a join runs"}
	p.do(t, "diary_write", queued)
	p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "K49 written while the disk was full"})
	p.save(t)
	ctx := context.Background()
	s, err := outbox.Open(doctor.OutboxPath(p.dir), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload, _ := json.Marshal(queued)
	op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: payload, Wing: "wing_opencode"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t, p, pr)

	for _, o := range []Options{{DryRun: true}, {}} {
		rep := run(t, cfg, o)
		if len(rep.Failed) != 1 || !strings.Contains(rep.Failed[0].Error, op.Short()+" (queued)") || !strings.Contains(rep.Failed[0].Error, "devbox-config edge flush") {
			t.Fatalf("dry run %v: a join with the entry's op queued at the edge did not refuse naming it and the flush: %+v", o.DryRun, rep.Failed)
		}
		if n := writes(pr); n != 0 {
			t.Fatalf("dry run %v: the refused join wrote %d records to the primary", o.DryRun, n)
		}
	}

	primary := edge.NewPrimary(cfg.URL, cfg.Token, nil, edge.PrimaryOptions{Timeout: 5 * time.Second})
	defer primary.Close()
	(&outbox.Flusher{S: s, P: edge.FlushTarget(primary)}).Drain(ctx) // devbox-config edge flush
	if rep := run(t, cfg, Options{}); !rep.OK() || rep.Sent[Diaries] != 1 || rep.Skipped[Diaries] != 1 {
		t.Fatalf("the join after the flush (want the entry that stayed local sent, the flushed one skipped): sent %v, skipped %v, failed %+v", rep.Sent, rep.Skipped, rep.Failed)
	}
	entries := map[string]int{}
	for _, d := range pr.pl.Dump().Drawers {
		if d.Room == "diary" {
			entries[d.Content]++
		}
	}
	if len(entries) != 2 || entries[queued["entry"].(string)] != 1 || entries["K49 written while the disk was full"] != 1 {
		t.Fatalf("the primary's diary entries (want each once): %v", entries)
	}
}

// refusing is a primary that refuses every call as a bad request.
type refusing struct{}

func (refusing) Up() bool { return true }
func (refusing) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	return nil, &outbox.RPCError{Code: -32602, Message: "Unknown parameter 'bogus' for tool " + tool}
}

// An entry whose edge op the primary refused (dead) waits for its
// operator: the join refuses while it is dead, and once it is dropped the
// join sends the entry, once.
func TestJoinSendsADiaryEntryOnceItsDeadEdgeOpIsDropped(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	entry := map[string]any{"agent_name": "opencode", "entry": "refused at the edge"}
	p.do(t, "diary_write", entry)
	p.save(t)
	ctx := context.Background()
	s, err := outbox.Open(doctor.OutboxPath(p.dir), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload, _ := json.Marshal(entry)
	op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: payload, Wing: "wing_opencode"})
	if err != nil {
		t.Fatal(err)
	}
	(&outbox.Flusher{S: s, P: refusing{}, MaxRefusals: 1}).Drain(ctx)
	cfg := config(t, p, pr)
	if rep := run(t, cfg, Options{}); len(rep.Failed) != 1 || !strings.Contains(rep.Failed[0].Error, op.Short()+" (dead)") || writes(pr) != 0 {
		t.Fatalf("a join beside the entry's dead edge op did not refuse naming it (or wrote %d): %+v", writes(pr), rep.Failed)
	}
	if _, _, err := s.Drop(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if rep := run(t, cfg, Options{}); !rep.OK() || rep.Sent[Diaries] != 1 {
		t.Fatalf("the join after the drop did not send the entry: sent %v, failed %+v", rep.Sent, rep.Failed)
	}
	if n := pr.pl.Calls("mempalace_diary_write"); n != 1 {
		t.Fatalf("the primary was sent the entry %d times, want once", n)
	}
}
