package mailbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// PageCap is event_list's hard limit: larger limits are silently clamped
// to 500 (RFC 003 §3.5, logstream.py:947).
const PageCap = 500

// ListTool is the primary's tool the pager calls.
const ListTool = "mempalace_event_list"

// Source answers mempalace_event_list on the primary.
type Source interface {
	// EventList calls mempalace_event_list with args and returns the
	// tool's JSON answer: {"events": [...], "count": n}, or {"error": ...}
	// for a refused query (an unknown since_event_id, say).
	EventList(ctx context.Context, args map[string]any) (json.RawMessage, error)
}

// ToolSource is a Source over any MCP tools/call: a *mcp.ClientSession's
// CallTool, or a wrapper around the edge's connection to the primary.
// NewToolSource sets its switches from the primary's own schema.
type ToolSource struct {
	Call func(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error)
	// AscOrder adds order="asc" to every call. Set it when the primary's
	// event_list schema lists "order" (mempalace 3.10+, which lists newest
	// first without a cursor); never otherwise, since the primary refuses
	// an argument its schema does not list.
	AscOrder bool
	// Writer sends the writer filter (Filters) as "writer", for a primary
	// whose schema lists it (3.11+, where from_agent names the caller and
	// filters nothing); without it the filter goes as from_agent, which
	// named the writer before 3.11.
	Writer bool
}

// NewToolSource is a ToolSource calling call on a primary that lists
// tools: order and writer are sent where its event_list lists them.
func NewToolSource(call func(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error), tools []*mcp.Tool) ToolSource {
	p := ListParams(tools)
	return ToolSource{Call: call, AscOrder: p["order"], Writer: p["writer"]}
}

// EventList implements Source.
func (s ToolSource) EventList(ctx context.Context, args map[string]any) (json.RawMessage, error) {
	args = maps.Collect(maps.All(args)) // a copy, never nil
	if s.AscOrder {
		args["order"] = "asc"
	}
	if w, ok := args["writer"]; ok && !s.Writer {
		delete(args, "writer")
		args["from_agent"] = w
	}
	res, err := s.Call(ctx, &mcp.CallToolParams{Name: ListTool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ListTool, err)
	}
	text := ""
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = t.Text
			break
		}
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: the primary answered an error: %s", ListTool, text)
	}
	if text == "" && res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("%s: structured content: %w", ListTool, err)
		}
		return b, nil
	}
	if text == "" {
		return nil, fmt.Errorf("%s: the primary's answer has no text content", ListTool)
	}
	return json.RawMessage(text), nil
}

// ListParams is the set of parameters event_list's input schema lists
// among the primary's tools (empty when it has no event_list).
func ListParams(tools []*mcp.Tool) map[string]bool {
	out := map[string]bool{}
	for _, t := range tools {
		if t == nil || t.Name != ListTool {
			continue
		}
		b, _ := json.Marshal(t.InputSchema) // a schema that does not encode lists nothing
		gjson.GetBytes(b, "properties").ForEach(func(k, _ gjson.Result) bool { out[k.String()] = true; return true })
	}
	return out
}

// ErrRefused wraps an {"error": ...} answer from event_list.
var ErrRefused = errors.New("event_list refused the query")

// Fetch pages through event_list with filter (stream, to_agent, ...),
// PageCap events a page, each page resuming after the previous page's
// last event id (since_event_id, which cannot skip anything: RFC 003
// §3.5), until a short page. A page that says "more" (a gateway whose
// fill of a page it cut stopped at its bound) is not the end, however
// short: the next resumes from its "next_cursor". It returns the events
// in arrival order.
//
// It returns too how many events the pages left out as from untrusted
// senders (a gateway's "untrusted_withheld" on each, summed).
//
// It fails rather than return a partial log: a page that does not move
// forward (a primary ignoring the cursor, listing newest first past
// the first page, or saying "more" with no events and the cursor it was
// given) is an error, as is an {"error": ...} answer (§7.6: a
// refusal comes back as a successful call).
func Fetch(ctx context.Context, src Source, filter map[string]any) ([]Event, int, error) {
	var all []Event
	withheld := 0
	cursor := ""
	var last int64 = -1
	for page := 0; ; page++ {
		args := maps.Collect(maps.All(filter)) // a copy, never nil
		args["limit"] = PageCap
		if cursor != "" {
			args["since_event_id"] = cursor
		}
		raw, err := src.EventList(ctx, args)
		if err != nil {
			return nil, 0, err
		}
		evs, next, held, err := parsePage(raw)
		if err != nil {
			return nil, 0, fmt.Errorf("%s page %d: %w", ListTool, page+1, err)
		}
		withheld += held
		if cursor == "" && descending(evs) {
			if len(evs) >= PageCap {
				return nil, 0, fmt.Errorf("%s lists newest first and the log is longer than one page: the primary needs order=asc (NewToolSource sends it when its schema lists order)", ListTool)
			}
			slices.Reverse(evs)
		}
		for _, e := range evs {
			if e.Seq <= last {
				return nil, 0, fmt.Errorf("%s page %d: event %s (seq %d) is not after seq %d: the primary did not honour since_event_id", ListTool, page+1, e.ID, e.Seq, last)
			}
			last = e.Seq
		}
		all = append(all, evs...)
		switch {
		case next != "" && next == cursor && len(evs) == 0:
			return nil, 0, fmt.Errorf("%s page %d: the answer says there is more but gives no events and the same next_cursor %q: it does not move forward, so reading on would never end", ListTool, page+1, next)
		case next != "":
			cursor = next
		case len(evs) < PageCap:
			return all, withheld, nil
		default:
			cursor = evs[len(evs)-1].ID
		}
	}
}

func descending(evs []Event) bool {
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq >= evs[i-1].Seq {
			return false
		}
	}
	return len(evs) > 1
}

// parsePage is a page's events, when it says there is more past a short
// page, the cursor to read on from ("": none), and how many events it
// withheld as from untrusted senders.
func parsePage(raw json.RawMessage) ([]Event, string, int, error) {
	var p struct {
		Events   []json.RawMessage `json:"events"`
		Error    any               `json:"error"`
		More     bool              `json:"more"`
		Next     string            `json:"next_cursor"`
		Withheld float64           `json:"untrusted_withheld"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, "", 0, fmt.Errorf("answer is not a JSON object: %w (%.120s)", err, strings.TrimSpace(string(raw)))
	}
	if p.Error != nil {
		return nil, "", 0, fmt.Errorf("%w: %v", ErrRefused, p.Error)
	}
	if p.Events == nil {
		return nil, "", 0, fmt.Errorf("answer has no events array (%.120s)", strings.TrimSpace(string(raw)))
	}
	if !p.More {
		p.Next = ""
	}
	out := make([]Event, 0, len(p.Events))
	for i, r := range p.Events {
		e, err := ParseEvent(r)
		if err != nil {
			return nil, "", 0, fmt.Errorf("events[%d]: %w", i, err)
		}
		out = append(out, e)
	}
	return out, p.Next, int(p.Withheld), nil
}
