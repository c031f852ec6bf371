package mailbox

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// floodItem is an owed ask with a body of n bytes and 60 KB of metadata,
// from a device the reader trusts or not.
func floodItem(t *testing.T, i, n int, trusted bool) Item {
	t.Helper()
	raw := fmt.Sprintf(`{"id":"evt_%03d","seq":%d,"type":"task.request","stream":"s","from_agent":"pi@mallory","to_agent":"pi@dave","status":"open","body":%q,"metadata":{"pad":%q},"origin":{"device":"mallory","trusted":%t}}`,
		i, i, strings.Repeat("é", n/2), strings.Repeat("x", 60000), trusted)
	e, err := ParseEvent([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return Item{Event: e, Why: "open ask to you"}
}

func toolText(t *testing.T, r Result) string {
	t.Helper()
	res, err := ToolResult(r)
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// 50 asks of 250 KB each from an untrusted device made a 12 MB tool
// answer (attack111 F3). Bounded keeps the answer under AnswerMax: bodies
// cut at AnswerBodyMax bytes (on a character's edge) with "…" and the
// whole size, big metadata left out with its size, the items that do not
// fit left out and counted, a trusted ask kept before untrusted ones, and
// a note saying how to read one whole; Only gives that one whole.
func TestToolAnswerIsBounded(t *testing.T) {
	r := Result{Agent: "pi@dave"}
	for i := range 50 {
		r.Owed = append(r.Owed, floodItem(t, i, 250000, i == 49))
	}
	r.Count = len(r.Owed)
	text := toolText(t, Bounded(r))
	if len(text) > AnswerMax {
		t.Fatalf("the answer is %d bytes, over %d", len(text), AnswerMax)
	}
	got := gjson.Parse(text)
	first := got.Get("owed.0")
	if body := first.Get("body").Str; len(body) > AnswerBodyMax+len("…") || !strings.HasSuffix(body, "é…") || first.Get("body_bytes").Int() != 250000 {
		t.Errorf("the body is not cut at %d bytes with its size: %d bytes, body_bytes %v", AnswerBodyMax, len(body), first.Get("body_bytes"))
	}
	if first.Get("metadata").Exists() || first.Get("metadata_bytes").Int() < 60000 {
		t.Errorf("big metadata is not left out with its size: %s", first.Raw[:min(len(first.Raw), 300)])
	}
	left := int(got.Get("left_out").Int())
	if left == 0 || got.Get("count").Int()+int64(left) != 50 || !strings.Contains(got.Get("bound").Str, "event_id") {
		t.Errorf("left out %d, count %d, bound %q", left, got.Get("count").Int(), got.Get("bound").Str)
	}
	if !strings.Contains(text, `"evt_049"`) {
		t.Error("the trusted ask was left out for untrusted ones")
	}
	one, err := r.Only("evt_007")
	if err != nil || len(one.Owed) != 1 || len(gjson.Get(toolText(t, one), "owed.0.body").Str) != 250000 {
		t.Errorf("Only: %v", err)
	}
	if _, err := r.Only("evt_999"); err == nil || !strings.Contains(err.Error(), "evt_999") {
		t.Errorf("an id not owed: %v", err)
	}
	small := Result{Agent: "pi@dave", Owed: []Item{floodItem(t, 1, 100, false)}, Count: 1}
	small.Owed[0].Event.Raw = []byte(`{"id":"evt_001","body":"short"}`)
	if got := gjson.Parse(toolText(t, Bounded(small))); got.Get("bound").Exists() || got.Get("owed.0.body").Str != "short" {
		t.Errorf("a small answer changed: %s", got.Raw)
	}
}

// An event id not owed by a device that withholds untrusted senders may
// be one withheld: the refusal says so and how to see them (attack113
// F7); with none withheld, it says nothing of it.
func TestOnlyOfAnIDNotOwedNamesWithholding(t *testing.T) {
	t.Parallel()
	for _, withheld := range []int{0, 5} {
		r := Result{Agent: "opencode@desktop", UntrustedWithheld: withheld}
		_, err := r.Only("evt_f173700b8ce8")
		says := err != nil && strings.Contains(err.Error(), "5 events withheld as from untrusted senders") && strings.Contains(err.Error(), SeeWithheld)
		if err == nil || !strings.Contains(err.Error(), "evt_f173700b8ce8") || says != (withheld > 0) || withheld == 0 && strings.Contains(err.Error(), "withheld") {
			t.Errorf("%d withheld: %v", withheld, err)
		}
	}
}
