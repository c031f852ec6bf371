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
