package edge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// primaryAdapter lets the outbox send through the supervisor: the op's
// argument bytes as they are, its op id (and why it is sent again, if it
// is) in _meta.
type primaryAdapter struct{ p *Primary }

func (a primaryAdapter) Up() bool { return a.p.Up() }

// URL is the primary's URL, recorded with a failed send's last error.
func (a primaryAdapter) URL() string { return a.p.endpoint }

// Ledger: the outbox's replay may lean on a gateway's op-id ledger.
func (a primaryAdapter) Ledger(ctx context.Context) (bool, error) { return a.p.Ledger(ctx) }

// callMeta is what a write's request carries in params._meta for a
// gateway, from the marks the flusher put on ctx.
func callMeta(ctx context.Context, tool string) mcp.Meta {
	meta := mcp.Meta{}
	if id := outbox.OpIDFrom(ctx); id != "" {
		meta[ledger.MetaKey] = id // a gateway's ledger answers a repeat from its record
		if why := outbox.ResendFrom(ctx); why != "" {
			meta[ledger.ResendKey] = why // an op it holds in doubt is forwarded again
		}
		if dev := outbox.QueuedAsFrom(ctx); dev != "" {
			meta[ledger.QueuedAsKey] = dev // retried as another device: the ledger keys it under this one
		}
		if at := outbox.MadeAtFrom(ctx); !at.IsZero() {
			meta[ledger.MadeAtKey] = at.UTC().Format(time.RFC3339Nano) // a kg_add made before a replacement landed is held
		}
	}
	if dev := origin.DeviceFrom(ctx); dev != "" { // a join's --origin-device, for a gateway's provenance
		meta[origin.MetaKey] = dev
	}
	if origin.Joining(ctx) { // a join's replay: a gateway files nothing again that its trash holds as deleted
		meta[origin.JoinKey] = true
		if id := origin.JoinDrawer(ctx, outbox.OpIDFrom(ctx)); id != "" && tool == "mempalace_add_drawer" {
			meta[origin.JoinDrawerKey] = id // updated after it was filed: the trash may hold it by this id
		}
		if n := outbox.CopyFrom(ctx); n > 0 && tool == "mempalace_diary_write" {
			meta[origin.JoinCopyKey] = n // which equal copy: the trash accounts for as many as it holds
		}
	}
	if outbox.Replaying(ctx) && !origin.Joining(ctx) {
		// An add_drawer the local palace answered already_exists: a replay
		// of its copy. The join mark too: a gateway that predates the
		// replay mark refuses it as a join's (its own words), one that
		// knows it words the refusal for a replay.
		meta[origin.JoinKey], meta[origin.ReplayKey] = true, true
	}
	if base := outbox.BaseFrom(ctx); base != "" {
		// An update of the text the local palace held: a gateway refuses
		// it if the primary's text changed since (an older one ignores it).
		meta[origin.BaseKey] = base
	}
	if items := outbox.ReplayItemsFrom(ctx); len(items) > 0 {
		// A checkpoint's items the local palace held already: a gateway
		// does not file those an admin deleted on the primary (an older
		// one ignores the key and files them).
		meta[origin.ReplayItemsKey] = items
	}
	return meta
}

// Device is what a gateway says of this token, from its answer to the
// session's handshake (every authenticated answer says it; ID "": no
// gateway, or the primary not reached: the send then fails on its own).
func (a primaryAdapter) Device(ctx context.Context) deviceinfo.Info {
	if _, err := a.p.sessionFor(ctx); err != nil {
		return deviceinfo.Info{} // the send that follows meets the same failure and records it
	}
	in, _ := a.p.Device()
	return in
}

func (a primaryAdapter) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if meta := callMeta(ctx, tool); len(meta) > 0 {
		params.Meta = meta
	}
	call := func(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
		return a.p.Call(ctx, params, false) // a look-up: the call timeout
	}
	if _, bounded := ctx.Deadline(); bounded && outbox.OpIDFrom(ctx) != "" {
		call = a.p.Send // the op's own write: the flusher's bound, which grows with the sends that timed out
	}
	res, err := call(ctx, params)
	if err != nil {
		if rpcErr := peerError(err); rpcErr != nil {
			return nil, &outbox.RPCError{Code: int(rpcErr.Code), Message: rpcErr.Message, Rule: gjson.GetBytes(rpcErr.Data, "rule").Str}
		}
		return nil, err
	}
	m := answerOf(tool, res)
	if m == nil {
		return nil, errUnreadableAnswer
	}
	if res.Meta[ledger.ReplayedKey] == true {
		// A gateway's ledger answered from its record: the write landed
		// when the op was first sent (a join counts it as there already).
		m[ledger.ReplayedKey] = true
	}
	return m, nil
}

// errUnreadableAnswer: a MemPalace tool (one the catalogue knows, which
// always answers one JSON object) answered without one: not its answer
// (a proxy's page, an empty result), so the write may or may not have
// landed (classified lost: looked up before any resend).
var errUnreadableAnswer = errors.New("the primary's answer holds no JSON object: the write may or may not have landed")

// answerOf is the outbox's reading of an MCP result: the first text block
// that is a JSON object (a 3.8+ stdio proxy puts a notice block before
// it), its numbers kept as written (json.Number: the answer the agent
// reads of a queued write is this one re-encoded, and a 64-bit id in it
// must not round through a float64, attack67 N3). A result with none is still an answer for a tool the catalogue
// does not know: isError says whether the primary took the write (MCP's
// own word; an empty or prose result is success). For a MemPalace tool
// it is nil: unreadable.
func answerOf(tool string, res *mcp.CallToolResult) map[string]any {
	text := ""
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			continue
		}
		if m := numbersKept(tc.Text); m != nil {
			if res.IsError && m["error"] == nil {
				m["error"] = tc.Text
			}
			return m
		}
		if text == "" {
			text = tc.Text
		}
	}
	switch _, known := catalogue.Lookup(tool); {
	case res.IsError:
		return map[string]any{"success": false, "error": "the primary answered isError: " + text}
	case known:
		return nil
	}
	return map[string]any{"answer": text}
}

// FlushTarget adapts a Primary for an outbox Flusher (the running edge's,
// devbox-config edge flush, join), its writes paced to a gateway's write
// rate once refused for it (pacer).
func FlushTarget(p *Primary) outbox.Primary { return pacedTarget{primaryAdapter{p}, &pacer{}} }

// numbersKept is text parsed as a JSON object, its numbers json.Number
// (nil: not one object).
func numbersKept(text string) map[string]any {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || dec.More() {
		return nil
	}
	return m
}
