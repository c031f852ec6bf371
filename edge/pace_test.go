package edge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway"
)

// attack48 F3: the edge's flush of writes queued while the primary was
// away meets the gateway's write rate a few times, then paces its writes
// to it, as a join does; before, each queued write met it again after its
// own backoff (500 ms, doubling), so a flush of a few hundred writes left
// hundreds of `limited` lines in the gateway's audit log.
//
// Both flushes: the running edge's flusher (Run) and `edge flush` (Drain),
// which before this stopped with the writes the rate refused last still
// queued, "N ops not sent" and exit 1, though the primary was there.
func TestAFlushPacesItsWritesToTheGatewaysRate(t *testing.T) {
	if testing.Short() {
		t.Skip("sends at a paced rate for seconds: the integration tier")
	}
	t.Parallel()
	for _, drain := range []bool{false, true} {
		t.Run(map[bool]string{false: "run", true: "drain"}[drain], func(t *testing.T) {
			t.Parallel()
			flushPacedToTheRate(t, drain)
		})
	}
}

func flushPacedToTheRate(t *testing.T, drain bool) {
	const writes, rate = 200, 50 // the burst is as large as the rate: about 3 s of sending after it
	_, srv := startPrimary(t)
	url, tokens, gw := testGatewayServer(t, srv.URL(), gateway.Device{ID: "desk-9b21", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", WriteRate: rate, Agents: []string{"opencode@edge-test"}})
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range writes {
		payload := fmt.Appendf(nil, `{"wing":"project","room":"r","content":"queued note %d"}`, i)
		if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Wing: "project", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	p := NewPrimary(url, func() string { return tokens["desk-9b21"] }, slog.New(slog.DiscardHandler), PrimaryOptions{})
	defer p.Close()
	began := time.Now()
	f := &outbox.Flusher{S: s, P: FlushTarget(p)}
	if drain { // edge flush: once, and everything is sent
		if sent, err := f.Drain(ctx); err != nil || sent != writes {
			t.Fatalf("edge flush sent %d of %d queued writes: %v", sent, writes, err)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if !drain {
		wg.Go(func() { f.Run(ctx) }) // the running edge's flusher
	}
	for n := writes; n > 0; {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d queued writes still pending after %s", n, writes, time.Since(began).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
		if n, _, err = s.Pending(ctx); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(began)
	audit, err := os.ReadFile(filepath.Join(filepath.Dir(gw.ConfigFile), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	limited := bytes.Count(audit, []byte(`"decision":"limited"`))
	t.Logf("%d queued writes at %d writes/s (burst %d): %d limited, %s", writes, rate, rate, limited, took.Round(time.Millisecond))
	if limited > writes/10 {
		t.Errorf("the gateway refused the flush's writes %d times for the write rate: the flush did not pace itself", limited)
	}
}
