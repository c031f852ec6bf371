package edge

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

type discardCloser struct{ io.Writer }

func (discardCloser) Close() error { return nil }

// A mine the agent cancelled (given up) while a write sent before it is
// still at the local palace: the write's answer does not make the edge
// forget the mine, which the child runs next (for minutes), so reads
// still see the palace busy. A call given up before the answered one is
// forgotten (the child is past it).
func TestAWriteAnsweredDoesNotForgetAMineCancelledAfterIt(t *testing.T) {
	_, w := io.Pipe()
	c := &childConn{calls: map[string]relayedCall{}, log: slog.New(slog.DiscardHandler), sdkW: w, stdin: discardCloser{io.Discard}, done: make(chan struct{})}
	send := func(id string) {
		if _, err := c.send(id, "tools/call", []byte(`{}`), func([]byte, error) {}, false); err != nil {
			t.Fatal(err)
		}
	}
	send("edge-1") // given up, never answered
	send("edge-2") // a write
	send("edge-3") // the mine after it
	c.abandon("edge-1", "cancelled")
	c.abandon("edge-3", "cancelled")
	c.route([]byte(`{"jsonrpc":"2.0","id":"edge-2","result":{}}`)) // the write answers; the mine starts
	after := time.Now()
	c.mu.Lock()
	_, before := c.calls["edge-1"]
	c.mu.Unlock()
	if before {
		t.Error("a call given up before the answered one is still counted: the child is past it")
	}
	if !c.busySince(after.Add(time.Nanosecond)) {
		t.Fatal("the cancelled mine the child runs after the answered write is no longer counted: the palace reads as idle")
	}
}

// A get_drawer the fast lane sends only to an idle child does not wait to
// write behind a call stuck writing to the child (its stdin pipe full
// during a mine): it is declined at once, so the agent's input keeps
// being read.
func TestAnIdleOnlySendDoesNotWaitBehindAStuckWrite(t *testing.T) {
	r, w := io.Pipe() // nobody reads: a write blocks, as on a full pipe
	_, sdkW := io.Pipe()
	c := &childConn{calls: map[string]relayedCall{}, log: slog.New(slog.DiscardHandler), sdkW: sdkW, stdin: w, done: make(chan struct{})}
	stuck := make(chan error, 1)
	go func() {
		_, err := c.send("edge-1", "tools/call", []byte(`{}`), func([]byte, error) {}, false)
		stuck <- err
	}()
	waitFor(t, 10*time.Second, "the stuck call registered", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.calls) == 1
	})
	declined := make(chan bool, 1)
	go func() {
		sent, _ := c.send("edge-2", "tools/call", []byte(`{}`), func([]byte, error) {}, true)
		declined <- !sent
	}()
	select {
	case ok := <-declined:
		if !ok {
			t.Error("an idle-only send was sent with a call in flight")
		}
	case <-time.After(10 * time.Second):
		t.Error("an idle-only send waited behind a write stuck on the child's input")
		r.Close() // the stuck write ends, and the send behind it
		<-declined
	}
	r.Close() // the stuck write ends
	<-stuck
}
