package edge

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// A connect to a primary that accepts and never answers ends when its
// caller gives up (the edge stopping: its start's connect is waited for
// before the edge exits). Before, it sometimes took 5 s more: the MCP SDK
// sends a notifications/cancelled for the initialize it gave up, on a
// detached context bounded at 5 s, and the session's Close inside its
// Connect waits for that send to the hung primary. An agent's exit, or a
// container stop, waited for it (TestWakeFromTheKeptViewWithThePrimaryHung
// took 6 s instead of 1 s beside the hung-proxy test). The race between
// the send and the Close is won either way: many connects show it.
func TestAConnectGivenUpOnAHungPrimaryEndsAtOnce(t *testing.T) {
	t.Parallel()
	url := testbed.HungPrimary(t)
	const connects, giveUp = 24, 100 * time.Millisecond
	var wg sync.WaitGroup
	took := make([]time.Duration, connects)
	for i := range connects {
		wg.Go(func() {
			p := NewPrimary(url, func() string { return testToken }, slog.New(slog.NewTextHandler(io.Discard, nil)), PrimaryOptions{Timeout: 30 * time.Second})
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), giveUp)
			defer cancel()
			began := time.Now()
			if _, err := p.sessionFor(ctx); err == nil {
				t.Error("a session from a primary that never answers")
			}
			took[i] = time.Since(began)
		})
	}
	wg.Wait()
	for i, d := range took {
		if d > giveUp+time.Second {
			t.Errorf("connect %d ended %v after it began, given up at %v", i, d, giveUp)
		}
	}
}
