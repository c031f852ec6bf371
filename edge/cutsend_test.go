//go:build linux

package edge

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
)

// A diary entry sent over a slow link to a bare primary (no gateway, no
// op-id ledger) and cut at its send bound is filed once: the edge resets
// the connection of a cut send, so the bytes of it still in its socket
// buffer never arrive; the primary gets a truncated request, which it does
// not apply, before the look-up that finds nothing and the send that
// lands. Before, the cut send's close let the kernel deliver the rest of
// the request after the look-up, and the entry was filed twice or more
// (attack91 F1, reproduced against real MemPalace 3.11.0).
func TestADiaryEntryCutOnASlowLinkIsFiledOnce(t *testing.T) {
	t.Parallel()
	// Bound to 127.0.0.2: a primary on 127.0.0.1 refuses the proxy's
	// port in Host (anti DNS rebinding, as serve).
	primary, err := fakepalace.New(fakepalace.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := primary.NewHTTP(fakepalace.HTTPOptions{Token: testToken})
	if err := srv.Start("127.0.0.2:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	link := slowLink(t, srv.URL(), 4<<10, 20*time.Millisecond) // 200 KB/s uplink
	// 280 KB: 1.4 s on the link, past the first send's bound (2 x 250 ms)
	// by more than the backoff before its look-up (at most 500 ms), and
	// small enough for the edge's socket buffer to take it whole.
	text := strings.Repeat("slow uplink line ", 16500)
	h := start(t, harnessOpts{primaryURL: link, timeout: 250 * time.Millisecond})
	if w, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": text}); w["success"] != true {
		t.Fatalf("diary_write: %v", w)
	}
	h.drained() // the send that lands takes 1.4 s: what a cut send let go (at most 0.9 s of it) is in by then
	if n := diaryCopies(primary, text); n != 1 {
		t.Fatalf("the primary holds the diary entry %d times, want once", n)
	}
	// The primary was reachable throughout: a send cut by its own bound
	// says nothing of it (attack91 F4).
	if logs := h.logs.String(); strings.Contains(logs, "primary unreachable") || strings.Contains(logs, "reachable again") {
		t.Errorf("a send cut at its bound logged the primary unreachable:\n%s", logs)
	}
}

// slowLink is a TCP proxy to target's host standing in for a slow
// uplink: it reads a request from the edge only as fast as it passes it
// on (chunk every per), with a small receive window, so what the edge
// wrote waits in the edge's own socket buffer, not in the proxy; a reset
// from the edge resets the connection to target too. Answers pass as
// they come. It returns target's URL through the proxy.
func slowLink(t *testing.T, target string, chunk int, per time.Duration) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	to := u.Host
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // the listener closed at the test's end
			}
			wg.Go(func() { relaySlowly(ctx, c.(*net.TCPConn), to, chunk, per) })
		}
	})
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	u.Host = ln.Addr().String()
	return u.String()
}

// relaySlowly relays one connection: upstream at chunk per per, back as
// it comes. It returns when both directions have ended, or ctx has.
func relaySlowly(ctx context.Context, c *net.TCPConn, to string, chunk int, per time.Duration) {
	defer c.Close() // the relay is over
	up, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		return
	}
	upc := up.(*net.TCPConn)
	defer upc.Close()                                                 // the relay is over
	defer context.AfterFunc(ctx, func() { c.Close(); upc.Close() })() // the test's end: an idle connection the target keeps alive
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(c, upc) // the answer; ends when the target closes or the client's side fails
		c.Close()       // the answer is over: the edge sees it end
	})
	buf := make([]byte, chunk)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := upc.Write(buf[:n]); werr != nil {
				break
			}
		}
		if errors.Is(err, syscall.ECONNRESET) {
			upc.SetLinger(0) // the edge reset its request: so is the target's copy of it
			upc.Close()      // the reset passed on
			break
		}
		if err != nil {
			break // EOF (or the answer's end closed c): the request is all passed on
		}
		time.Sleep(per)
	}
	wg.Wait()
}
