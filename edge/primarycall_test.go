package edge

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/wire"
)

// A primary that answers a POST with an event stream may send its own
// notifications (progress, logging) first, and split data over lines; the
// answer to the call is the event with its id. A stream that ends without
// it is an error, not an empty answer.
func TestReadEventAnswer(t *testing.T) {
	t.Parallel()
	stream := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		": a comment\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"edge-3\",\n" +
		"data: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n"
	b, err := wire.ReadEventAnswer(strings.NewReader(stream), "edge-3", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	res, rpcErr, ok := wire.AnswerFor(b, "edge-3")
	if !ok || rpcErr != nil || !strings.Contains(string(res), `"text":"ok"`) {
		t.Fatalf("answer %s: %s %v %v", b, res, rpcErr, ok)
	}
	if _, err := wire.ReadEventAnswer(strings.NewReader("data: {\"jsonrpc\":\"2.0\",\"id\":\"edge-2\",\"result\":{}}\n\n"), "edge-3", 1<<20); err == nil {
		t.Fatal("a stream without the answer gave no error")
	}
}

func TestAnswerFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body    string
		ok      bool
		isError bool
	}{
		{`{"jsonrpc":"2.0","id":"edge-1","result":{"content":[]}}`, true, false},
		{`{"jsonrpc":"2.0","id":"edge-1","error":{"code":-32601,"message":"Unknown tool"}}`, true, true},
		{`{"jsonrpc":"2.0","id":"edge-9","result":{}}`, false, false}, // someone else's answer
		{`{"jsonrpc":"2.0","id":"edge-1"}`, false, false},             // neither
		{`not json`, false, false},
	} {
		_, rpcErr, ok := wire.AnswerFor([]byte(c.body), "edge-1")
		if ok != c.ok || (rpcErr != nil) != c.isError {
			t.Errorf("%s: ok=%v error=%v", c.body, ok, rpcErr)
		}
	}
}

// The edge serving an agent logs a primary it cannot reach once, as it
// goes down; a Quiet one (join, whose report says it) does not.
func TestAPrimaryGoingDownIsLoggedUnlessQuiet(t *testing.T) {
	const url = "http://127.0.0.1:1/mcp" // nothing listens on port 1
	for _, quiet := range []bool{false, true} {
		var logged bytes.Buffer
		p := NewPrimary(url, func() string { return testToken }, slog.New(slog.NewTextHandler(&logged, nil)), PrimaryOptions{Timeout: time.Second, Quiet: quiet})
		p.ListTools(context.Background()) // fails: said below
		p.Close()
		if said := strings.Contains(logged.String(), "primary unreachable; answering from the local palace"); said == quiet {
			t.Errorf("quiet %v: logged %q", quiet, logged.String())
		}
	}
}
