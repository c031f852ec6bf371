package edge

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/fakepalace"
)

// appendDirect appends an event to the double pl in process (fast: a
// log longer than a page in well under a second); its id.
func appendDirect(t testing.TB, pl *fakepalace.Palace, args map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_event_append", "arguments": args}})
	out, err := pl.Handle(b)
	if err != nil {
		t.Fatal(err)
	}
	id := gjson.Get(gjson.GetBytes(out, "result.content.0.text").String(), "event.id").String()
	if id == "" {
		t.Fatalf("event_append: %s", out)
	}
	return id
}

// Once the log the edge reads holds more than a page (500) of events to
// its agent, the session start still tells the asks owed, the newest
// included. Before, the edge's first read ran before it had listed the
// primary's tools, so it sent no order=asc; the primary listed newest
// first, the pager refused a long log listed so, and the view never
// formed (outside tester, attack31 p13: nothing told, a DEBUG line only).
func TestTheWakeViewReadsALogLongerThanAPage(t *testing.T) {
	t.Parallel()
	pl, srv := startPrimary(t)
	ask := func(body string) string {
		return appendDirect(t, pl, map[string]any{"type": "task.request", "stream": "devbox", "room": "r", "from_agent": "pi@laptop", "to_agent": "opencode@edge-test", "status": "open", "body": body})
	}
	first := ask("the first ask")
	for i := range 510 {
		appendDirect(t, pl, map[string]any{"type": "note", "stream": "devbox", "room": "r", "from_agent": "pi@laptop", "to_agent": "*", "body": fmt.Sprint("broadcast ", i)})
	}
	last := ask("the last ask")
	h := start(t, harnessOpts{primaryURL: srv.URL(), wakeWait: 10 * time.Second})
	if in := instructionsOf(h); !strings.Contains(in, "owes 2 asks") || !strings.Contains(in, first) || !strings.Contains(in, last) {
		t.Errorf("instructions with %d events to the agent:\n%s", 512, in)
	}
}
