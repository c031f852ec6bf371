package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed"
)

// A write whose send bound runs out while its body is still being written
// (a checkpoint of megabytes over a slow uplink, bigger than the socket
// buffers) is not sent, but the primary was reached on a live connection
// and still answers: the breaker stays closed and nothing logs the
// primary unreachable (review28b F2, attack91 F4). Before, the cut send
// opened the breaker and logged "primary unreachable; answering from the
// local palace" once per cut send.
func TestAWriteCutWhileStillBeingWrittenLeavesThePrimaryUp(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	stalled := make(chan struct{})
	link, limit := stallLink(t, srv.URL(), sync.OnceFunc(func() { close(stalled) }))
	limit.Store(256 << 10) // a request's first 256 KB pass, then the link takes no more of it
	logged := &testbed.SyncBuffer{}
	// No call here is to run out of the call timeout (the ping after the
	// cut is answered): it is as long as a loaded machine needs. The send's
	// bound runs out once the link stalled it, while it is written, not
	// at a wall-clock bound: 1 s ran out on a loaded machine in the dial
	// before it (a dial that times out is an outage).
	p := NewPrimary(link, func() string { return testToken }, slog.New(slog.NewTextHandler(logged, nil)), PrimaryOptions{Timeout: time.Minute})
	defer p.Close()
	_, err := sendOwnBy(ranOut{context.Background(), stalled}, p, checkpoint(12<<20))
	if !errors.Is(err, outbox.ErrNotSent) {
		t.Fatalf("a write cut while being written: %v, want not sent", err)
	}
	if !p.Up() {
		t.Errorf("a write cut while being written opened the breaker (%s)", p.State())
	}
	if strings.Contains(logged.String(), "unreachable") {
		t.Errorf("a write cut while being written logged the primary unreachable:\n%s", logged)
	}
	if _, err := p.Call(context.Background(), statusCall(), false); err != nil {
		t.Errorf("a read after the cut write: %v", err)
	}
}

// A primary that takes connections and then never reads nor answers (a
// SIGSTOPped serve or gateway, a hung link) is marked down by a write
// timing out at its send bound, whether its request went out whole or
// was still being written: the flusher stops there rather than sending
// every queued op into it (review28b F1, why 3e5c489 was reverted).
func TestAWriteToAPrimaryThatStoppedReadingOpensTheBreaker(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1 << 10, 12 << 20} {
		_, srv := startPrimary(t)
		link, limit := stallLink(t, srv.URL(), nil)
		p := warmed(t, NewPrimary(link, func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: time.Minute, Probe: time.Hour}), 500*time.Millisecond)
		defer p.Close()
		limit.Store(0) // from now on, nothing more of any request passes
		if _, err := sendOwn(p, size, time.Second); err == nil {
			t.Fatalf("%d bytes: a write to a hung primary answered", size)
		}
		if p.Up() {
			t.Errorf("%d bytes: a write to a hung primary timed out and left the breaker closed", size)
		}
	}
}

// A write whose connect hangs (a primary that accepts and never answers
// its initialize) fails within the call timeout, however long its send
// bound: the connect is not a write slower than its bound (review28b F3).
// Before, it held the send (and every other caller's connect) for the
// whole bound.
func TestAWriteWhoseConnectHangsFailsAtTheCallTimeout(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	link, limit := stallLink(t, srv.URL(), nil)
	limit.Store(0)
	const timeout = 300 * time.Millisecond
	p := NewPrimary(link, func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: timeout, Probe: time.Hour})
	defer p.Close()
	began := time.Now()
	_, err := sendOwn(p, 1<<10, 20*time.Second)
	if took := time.Since(began); took > 10*timeout {
		t.Errorf("a write whose connect hung took %v, want about the call timeout %v", took, timeout)
	}
	if !errors.Is(err, outbox.ErrNotSent) || p.Up() {
		t.Errorf("a write whose connect hung: %v (up %v), want not sent and the breaker open", err, p.Up())
	}
}

// warmed is p connected, by a status call under its own call timeout (as
// long as a loaded machine needs), then given timeout: what a test times
// is what follows, not the connect, which overran 300-500 ms under load
// on two busy cores. Nothing else of p runs yet to read the timeout.
func warmed(t *testing.T, p *Primary, timeout time.Duration) *Primary {
	t.Helper()
	if _, err := p.Call(context.Background(), statusCall(), false); err != nil {
		p.Close()
		t.Fatalf("the primary's first status call: %v", err)
	}
	p.o.Timeout = timeout
	return p
}

func statusCall() *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "mempalace_status", Arguments: json.RawMessage(`{}`)}
}

// sendOwn sends an add_drawer of size bytes of content as the outbox
// sends an op's own write: through the flush target, with its op id and
// bound (from when the content is made).
func sendOwn(p *Primary, size int, bound time.Duration) (map[string]any, error) {
	args := checkpoint(size)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	return sendOwnBy(ctx, p, args)
}

// sendOwnBy is sendOwn of args bounded by ctx's deadline.
func sendOwnBy(ctx context.Context, p *Primary, args json.RawMessage) (map[string]any, error) {
	return FlushTarget(p).Call(outbox.WithOpID(ctx, "0123456789abcdef0123456789abcdef"), "mempalace_add_drawer", args)
}

// checkpoint is an add_drawer's arguments with size bytes of content.
func checkpoint(size int) json.RawMessage {
	args, _ := json.Marshal(map[string]any{"wing": "w", "room": "r", "content": strings.Repeat("checkpoint line ", size/16)}) // strings always marshal
	return args
}

// stallLink is a TCP relay to target's host that passes each connection's
// request bytes on until limit of them have passed, then stops reading it
// (a link that takes no more, or a primary that stopped reading);
// answers pass as they come. limit (no limit until set) is read at every
// read: lowering it stalls the connections open already too. stalled
// (if not nil) is called when a request stalls after some of it passed.
// It returns target's URL through the relay.
func stallLink(t *testing.T, target string, stalled func()) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var limit atomic.Int64
	limit.Store(1 << 62)
	to := u.Host
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // the listener closed at the test's end
			}
			wg.Go(func() { relayUpTo(ctx, c, to, &limit, stalled) })
		}
	})
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	u.Host = ln.Addr().String()
	return u.String(), &limit
}

// relayUpTo relays one connection, the request's bytes up to limit; the
// Host header is rewritten to name to (as relaySlowly); stalled as
// stallLink's. It returns when the connection ended, or ctx did.
func relayUpTo(ctx context.Context, c net.Conn, to string, limit *atomic.Int64, stalled func()) {
	defer c.Close() // the relay is over
	from, into := []byte("\r\nHost: "+c.LocalAddr().String()+"\r\n"), []byte("\r\nHost: "+to+"\r\n")
	up, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()                                                 // the relay is over
	defer context.AfterFunc(ctx, func() { c.Close(); up.Close() })() // the test's end
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		io.Copy(c, up) // the answer; ends when the target closes or the client's side fails
		c.Close()      // the answer is over: the client sees it end
	})
	buf := make([]byte, 32<<10)
	for passed := int64(0); ; {
		if limit.Load() <= passed {
			if stalled != nil && passed > 0 {
				stalled()
			}
			<-ctx.Done() // stalled: nothing more is read
			return
		}
		n, err := c.Read(buf)
		n = int(min(int64(n), max(limit.Load()-passed, 0))) // lowered during the read: the rest never passes
		if n > 0 {
			passed += int64(n)
			if _, werr := up.Write(bytes.Replace(buf[:n], from, into, 1)); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or the client's reset
		}
	}
}
