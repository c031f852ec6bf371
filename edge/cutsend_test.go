//go:build linux

package edge

import (
	"bytes"
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

	"github.com/joakimp/devbox-config/testbed/realpalace"
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
	if testing.Short() {
		t.Skip("3 s on a slow link, then its drain: the integration tier")
	}
	t.Parallel()
	primary, srv := startPrimary(t)
	// 99 KB at 33 KB/s: 3 s on the link, past the first send's bound
	// (2 x 500 ms) by more than the backoff before its look-up (at most
	// 500 ms). The call timeout is not shorter: the edge's other calls
	// (its handshake, the session start's event_list) pass the same link,
	// and on a loaded machine 250 ms was at times too little for them
	// (logged "primary unreachable", about one run in four).
	cutOnASlowLink(t, srv.URL(), 120*time.Millisecond, 500*time.Millisecond, nil, func(text string) int { return diaryCopies(primary, text) })
}

// TestRealADiaryEntryCutOnASlowLinkIsFiledOnce is the same against real
// MemPalace 3.11.0's serve, at 27 KB/s (3.7 s) and bounds of 2 s, 4 s...
func TestRealADiaryEntryCutOnASlowLinkIsFiledOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("real MemPalace")
	}
	srv := realpalace.New(t).Serve(t, testToken)
	cutOnASlowLink(t, srv.URL, 150*time.Millisecond, time.Second, realpalace.New(t), func(string) int {
		page := srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "wing_opencode", "limit": 100})
		ds, _ := page["drawers"].([]any)
		return len(ds)
	})
}

// cutOnASlowLink writes a 99 KB diary entry (serve takes up to 100,000
// characters; small enough for the edge's socket buffer to take whole)
// through a slowLink of 4 KB
// every per to target, with the call timeout given (a send's first bound
// twice that), and wants it on the primary once (copies counts it), with
// no "primary unreachable" logged: the primary answered throughout.
func cutOnASlowLink(t *testing.T, target string, per, timeout time.Duration, local *realpalace.Palace, copies func(text string) int) {
	t.Helper()
	link := slowLink(t, target, 4<<10, per)
	text := strings.Repeat("slow uplink line ", 5800)
	h := start(t, harnessOpts{primaryURL: link, timeout: timeout, realLocal: local})
	if w, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": text}); w["success"] != true {
		t.Fatalf("diary_write: %v", w)
	}
	waitFor(t, 60*time.Second, "the outbox drained", func() bool {
		n, _, err := h.edge.outbox.Pending(context.Background())
		return err == nil && n == 0
	})
	// A send cut after one that landed (whose look-up then found it) may
	// still be on the link: the rest of it is in within the link's time.
	time.Sleep(time.Duration(len(text)/(4<<10)+1) * per)
	if n := copies(text); n != 1 {
		t.Fatalf("the primary holds the diary entry %d times, want once", n)
	}
	if logs := h.logs.String(); strings.Contains(logs, "unreachable") || strings.Contains(logs, "reachable again") {
		t.Errorf("a send cut at its bound, the primary answering, logged the primary unreachable:\n%s", logs)
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
// it comes. Host is rewritten to name to: a primary on loopback refuses
// another port in it (anti DNS rebinding, as serve). It returns when both
// directions have ended, or ctx has.
func relaySlowly(ctx context.Context, c *net.TCPConn, to string, chunk int, per time.Duration) {
	defer c.Close() // the relay is over
	from, into := []byte("\r\nHost: "+c.LocalAddr().String()+"\r\n"), []byte("\r\nHost: "+to+"\r\n")
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
			if _, werr := upc.Write(bytes.Replace(buf[:n], from, into, 1)); werr != nil {
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
