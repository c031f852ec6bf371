package outbox_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// basePrimary answers every write and keeps the base each send carried.
type basePrimary struct {
	mu    sync.Mutex
	bases []string
}

func (p *basePrimary) Up() bool { return true }
func (p *basePrimary) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bases = append(p.bases, outbox.BaseFrom(ctx))
	return map[string]any{"success": true}, nil
}

// An update_drawer made while policy.json did not parse (held) is sent,
// once the policy parses and Release queues it under a new op id, with
// the base it was made on: a gateway still refuses it if another device
// changed the drawer since (before: the base stayed under the old op id,
// the send carried none, and the stale edit overwrote unchecked).
func TestAReleasedUpdateKeepsItsBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const base = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"v1"}`), Held: true, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, op, op.Payload, true); err != nil {
		t.Fatal(err)
	}
	p := &basePrimary{}
	f := &outbox.Flusher{S: s, P: p, Log: slog.New(slog.DiscardHandler)}
	if _, err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if len(p.bases) != 1 || p.bases[0] != base {
		t.Errorf("the released update was sent with base(s) %q, want [%s]: its check is lost", p.bases, base)
	}
}
