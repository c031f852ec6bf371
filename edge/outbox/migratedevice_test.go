package outbox_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// gatewayNaming is a gateway that names the edge's token dev and files
// what it is sent.
type gatewayNaming struct {
	dev  string
	mu   sync.Mutex
	sent []string
}

func (g *gatewayNaming) Up() bool                          { return true }
func (g *gatewayNaming) Device(ctx context.Context) string { return g.dev }
func (g *gatewayNaming) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	var a struct{ Content string }
	json.Unmarshal(args, &a) // a payload of the fixture's: an object
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sent = append(g.sent, a.Content)
	return map[string]any{"success": true, "drawer_id": "drawer_shared_f_" + a.Content[:2]}, nil
}

// Outside tester attack83 F6: an outbox an edge made before ops recorded
// the device they were queued as (9afaa28, f0f9e9f), holding a removed
// device's writes, migrated when the devbox is upgraded and given another
// device's token. The migration left them recording no device, and the
// flusher sent them as the new one. Now each op is recorded as queued as
// its origin device (what that edge stamped, added_by too), so one the
// gateway now names another is held, dead (other-device), never sent; an
// op queued with no origin device records none and is sent. (It failed
// before: both devF writes were sent as devG.)
func TestAnOlderOutboxsOpsAreHeldAsTheDeviceThatQueuedThem(t *testing.T) {
	t.Parallel()
	sqlText, err := os.ReadFile(filepath.Join("testdata", "outbox-9afaa28.sql"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), outbox.FileName)
	db, err := sqlitewal.Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(string(sqlText)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := outbox.Open(path, "devG", "labG") // the upgraded devbox's .env: devG's token
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for seq, want := range map[int64]string{1: "devF", 2: "devF", 3: "devF", 4: ""} {
		if op, err := s.Get(ctx, seq); err != nil || op.TokenDevice != want {
			t.Errorf("op %d migrated as queued as %q (%v), want %q", seq, op.TokenDevice, err, want)
		}
	}
	g := &gatewayNaming{dev: "devG"}
	if _, err := (&outbox.Flusher{S: s, P: g}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if len(g.sent) != 1 || g.sent[0] != "a drawer queued with no origin device" {
		t.Errorf("sent as devG: %q, want only the op that names no device", g.sent)
	}
	dead, err := s.List(ctx, 10, outbox.Dead)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range dead {
		if f := outbox.FailureOf(op.Error); f.Kind != outbox.OtherDevice || op.TokenDevice != "devF" {
			t.Errorf("op %d is dead as %s, queued as %q", op.LocalSeq, f.Kind, op.TokenDevice)
		}
	}
	if len(dead) != 2 {
		t.Errorf("%d ops held, want devF's 2: %+v", len(dead), dead)
	}
}
