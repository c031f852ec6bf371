package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/mailbox"
)

// write: local first, the agent gets the local result; a successful write
// to a replicated wing is enqueued for the primary, under the exact name
// the agent called it by.
func (e *Edge) write(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	var oldWing string
	if c.tool.Wings == catalogue.DrawerWing {
		oldWing = e.localWing(ctx, fmt.Sprint(c.argsMap()["drawer_id"]))
	}
	raw, lerr := e.localServer.Call(ctx, c.params)
	if errors.Is(lerr, ErrLocalDown) {
		return e.writeWithoutLocal(ctx, c, oldWing, lerr)
	}
	res, err := localAnswer(raw, lerr)
	if err != nil || res == nil || res.IsError {
		return res, err
	}
	m := resultJSON(res)
	if m != nil && (m["success"] == false || m["error"] != nil) {
		return res, nil // the local palace refused it: nothing to replicate
	}
	payload, wing, replicate := e.replicable(c, oldWing)
	if e.polErr != nil {
		return annotate(res, map[string]any{"replication": fmt.Sprintf("not replicated: policy unreadable: %v", e.polErr)}, false), nil
	}
	if !replicate {
		return annotate(res, map[string]any{"replication": "local only (policy)"}, false), nil
	}
	if e.outbox == nil {
		return annotate(res, map[string]any{"replication": fmt.Sprintf("not replicated: outbox unavailable: %v", e.obErr)}, false), nil
	}
	op, err := e.outbox.Enqueue(ctx, outbox.Write{Name: c.name, Tool: c.tool, Payload: payload, Wing: wing})
	if err != nil {
		e.log.Error("outbox write failed; the local write stands but is not replicated", "tool", c.name, "err", err)
		return annotate(res, map[string]any{"replication": fmt.Sprintf("not replicated: %v", err)}, false), nil
	}
	return annotate(res, map[string]any{"replication": "queued", "op_id": op.ID[:16]}, false), nil
}

// writeWithoutLocal: the local palace server is not running. A write the
// policy replicates is queued for the primary (the agent is told the local
// palace does not have it); anything else is the clear error it was.
func (e *Edge) writeWithoutLocal(ctx context.Context, c *call, oldWing string, down error) (*mcp.CallToolResult, error) {
	payload, wing, replicate := e.replicable(c, oldWing)
	if !replicate || e.polErr != nil || e.outbox == nil {
		return localDown(down), nil
	}
	op, err := e.outbox.Enqueue(ctx, outbox.Write{Name: c.name, Tool: c.tool, Payload: payload, Wing: wing})
	if err != nil {
		return localDown(down), nil
	}
	return jsonResult(map[string]any{
		"success": true, "queued": true, "op_id": op.ID[:16],
		"message": "the local palace server is not running: the write is queued for the primary only, and this machine's palace does not have it",
		"edge":    map[string]any{"local": "down: " + down.Error(), "replication": "queued", "degraded": true},
	}, false), nil
}

// localWing finds the wing of a drawer in the local palace.
func (e *Edge) localWing(ctx context.Context, id string) string {
	b, _ := json.Marshal(map[string]any{"drawer_id": id}) // a string: it encodes
	res, err := e.localServer.Call(ctx, &mcp.CallToolParams{Name: "mempalace_get_drawer", Arguments: json.RawMessage(b)})
	if err != nil {
		return ""
	}
	m := resultJSON(res)
	if m == nil {
		return ""
	}
	w, _ := m["wing"].(string)
	return w
}

// replicable decides what (if anything) goes to the outbox for a write:
// the payload, its wing, and whether the policy replicates it. The payload
// is the agent's arguments as sent, except where the edge must change
// them: provenance stamped on a tool that takes added_by, and a checkpoint
// cut to its replicated items and diary.
func (e *Edge) replicable(c *call, oldWing string) (json.RawMessage, string, bool) {
	rec, args := c.tool, c.argsMap()
	if rec.Wings == catalogue.KnowledgeGraph {
		return c.raw(), "", e.policy.KGReplicated()
	}
	if rec.Wings == catalogue.CheckpointWings {
		return e.replicableCheckpoint(args)
	}
	wings := rec.WingsOf(args, oldWing)
	if rec.Wings == catalogue.NoWing {
		w, _ := args["wing"].(string) // a tool the catalogue does not know: its own "wing", if any
		wings = []string{w}
	}
	wing := ""
	for _, w := range wings {
		if w != "" {
			wing = w
			break
		}
	}
	if wing != "" && !e.policy.Replicated(wing) {
		return nil, wing, false
	}
	if e.stamps(rec) {
		out := maps.Clone(args)
		e.stamp(out)
		b, err := json.Marshal(out)
		if err != nil { // values just decoded from JSON: they encode
			return nil, wing, false
		}
		return b, wing, true
	}
	return c.raw(), wing, true
}

// replicableCheckpoint keeps a checkpoint's items in replicated wings and
// its diary if the diary's wing replicates; nothing left, nothing queued.
func (e *Edge) replicableCheckpoint(args map[string]any) (json.RawMessage, string, bool) {
	out := maps.Clone(args)
	items, _ := args["items"].([]any)
	keep := []any{}
	for _, it := range items {
		im, _ := it.(map[string]any)
		if w, _ := im["wing"].(string); e.policy.Replicated(w) {
			keep = append(keep, it)
		}
	}
	diaryOK := false
	if d, ok := args["diary"].(map[string]any); ok {
		diaryOK = e.policy.Replicated(catalogue.DiaryWingFor(d))
		if !diaryOK {
			delete(out, "diary")
		}
	}
	if len(keep) == 0 && !diaryOK {
		return nil, "", false
	}
	out["items"] = keep
	e.stamp(out)
	b, err := json.Marshal(out)
	if err != nil { // values just decoded from JSON: they encode
		return nil, "", false
	}
	return b, "", true
}

// coordinationWrite: durable through the outbox and sent at once; the agent
// gets the primary's own answer (its event id), or "queued" when the
// primary cannot be reached in time.
func (e *Edge) coordinationWrite(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	res, err := e.coordinationSend(ctx, c)
	// A bare or missing writer is unreachable in a fleet (RFC 003 §7.7):
	// the agent is told; what it sent is never rewritten.
	if w := mailbox.CheckFromAgent(c.tool, c.name, c.argsMap()); w != "" && err == nil {
		e.log.Warn("coordination write with an unaddressable writer", "tool", c.name, "warning", w)
		res = annotate(res, map[string]any{"warning": w}, false)
	}
	return res, err
}

func (e *Edge) coordinationSend(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	if e.outbox == nil {
		return e.primaryOnly(ctx, c, "the outbox is unavailable, sent directly")
	}
	op, err := e.outbox.Enqueue(ctx, outbox.Write{Name: c.name, Tool: c.tool, Payload: c.raw()})
	if err != nil {
		e.log.Error("outbox write failed; sending directly", "tool", c.name, "err", err)
		return e.primaryOnly(ctx, c, "the outbox failed, sent directly")
	}
	// Sent at once unless the breaker is open (the flusher waits for the
	// primary's recovery); the wait ends at the answer, or at the first
	// failed attempt (the op stays queued and the flusher retries it).
	done := op
	if e.remote.Up() {
		wctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
		defer cancel()
		done, _ = e.outbox.Wait(wctx, op.ID) // on an error (ctx, a read) the op is as it was: queued
	}
	switch done.State {
	case outbox.Done:
		var m map[string]any
		if err := json.Unmarshal(done.Result, &m); err != nil {
			return nil, fmt.Errorf("the outbox's record of the primary's answer: %w", err)
		}
		return jsonResult(m, false), nil
	case outbox.Dead:
		return errorResult(fmt.Sprintf("the primary refused this write: %s", done.Error), map[string]any{"op_id": op.ID[:16]}), nil
	}
	edge := map[string]any{"primary": e.remote.State(), "degraded": true}
	if len(done.Error) > 0 {
		edge["attempt"] = done.Error
	}
	return jsonResult(map[string]any{
		"success": true, "queued": true, "op_id": op.ID[:16],
		"message": "the primary did not take the write now; it is queued durably and will be sent once, in order, when the primary takes it",
		"edge":    edge,
	}, false), nil
}

// primaryAdapter lets the outbox send through the supervisor.
type primaryAdapter struct{ p *Primary }

func (a primaryAdapter) Up() bool { return a.p.Up() }

// Ledger: the outbox's replay may lean on a gateway's op-id ledger.
func (a primaryAdapter) Ledger() bool { return a.p.LedgerAdvertised() }

func (a primaryAdapter) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	b, _ := json.Marshal(args) // the flusher decoded them from JSON: they encode
	params := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(b)}
	if id := outbox.OpIDFrom(ctx); id != "" {
		params.Meta = mcp.Meta{ledger.MetaKey: id} // a gateway's ledger answers a repeat from its record
	}
	if dev := origin.DeviceFrom(ctx); dev != "" { // a join's --origin-device, for a gateway's provenance
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		params.Meta[origin.MetaKey] = dev
	}
	res, err := a.p.Call(ctx, params, false)
	if err != nil {
		if rpcErr := peerError(err); rpcErr != nil {
			return nil, &outbox.RPCError{Code: int(rpcErr.Code), Message: rpcErr.Message}
		}
		return nil, err
	}
	m := resultJSON(res)
	if m == nil {
		if !res.IsError {
			// A 200 whose result holds no JSON object (an empty result, a
			// text that is not JSON) says nothing about the write: it may
			// have landed, so it is not taken for success.
			return nil, errUnreadableAnswer
		}
		m = map[string]any{"success": false, "error": "the primary answered isError"}
	}
	return m, nil
}

// errUnreadableAnswer: the primary answered a write with a result the
// outbox cannot read (classified ambiguous: maybe applied).
var errUnreadableAnswer = errors.New("the primary's answer holds no JSON object: the write may or may not have landed")

// FlushTarget adapts a Primary for an outbox Flusher outside a running
// edge (devbox-config edge flush).
func FlushTarget(p *Primary) outbox.Primary { return primaryAdapter{p} }
