package edge

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// A write queued while the primary refused the token waits the longest
// backoff (5 minutes). Once the operator issues a new token and the edge
// starts with it, the primary accepts it: the write goes out at once, not
// after that backoff or an `edge flush`. (Found by an outside tester:
// `edge status` said "token accepted" while the write still waited.)
func TestWriteQueuedUnderARefusedTokenGoesOutOnceTheTokenIsAccepted(t *testing.T) {
	t.Parallel()
	var token atomic.Value
	token.Store(testToken)
	h := start(t, harnessOpts{tokenFn: func() string { return token.Load().(string) }})
	ctx := context.Background()
	if _, res := h.call("add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "written before"}); res.IsError {
		t.Fatalf("the write was refused: %v", res.Content)
	}
	h.eventually("the first write on the primary", func() bool {
		ops, err := h.edge.outbox.List(ctx, 10, outbox.Done)
		return err == nil && len(ops) == 1
	})
	// The edge's first read of the mailbox (event_list, at its start) is
	// over before the token goes: read after it, it met the refusal
	// before the write did, and opened the breaker for the token, so the
	// write was never sent, never refused for its token, and the test
	// timed out waiting for it (10.2 s, under load).
	<-h.edge.wk.first
	token.Store("revoked") // the operator revokes it
	_, res := h.call("add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "written while revoked"})
	if res.IsError {
		t.Fatalf("the write was refused: %v", res.Content)
	}
	h.eventually("the write refused for its token", func() bool {
		ops, err := h.edge.outbox.List(ctx, 10, outbox.Queued)
		return err == nil && len(ops) == 1 && strings.Contains(string(ops[0].Error), string(outbox.Unauthorized))
	})
	h.stop()
	<-h.done

	fixed := start(t, harnessOpts{palace: h.palace, primaryURL: h.srv.URL()})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if done, err := fixed.edge.outbox.List(ctx, 10, outbox.Done); err == nil && len(done) == 2 {
			break
		}
		if time.Now().After(deadline) {
			ops, _ := fixed.edge.outbox.List(ctx, 10, outbox.Queued)
			for _, o := range ops {
				t.Errorf("op %s %s, next attempt in %v: %s", o.Short(), o.State, time.Until(o.NextAttemptAt).Round(time.Second), outbox.Words(o.Error))
			}
			t.Fatal("the write queued under the refused token is not on the primary 5 s after an edge started with an accepted token")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
