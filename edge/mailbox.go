package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/warmconn"
)

// The coordination mailbox (RFC 003 §3.3, §3.5): "what do I still owe?",
// derived by the edge for every harness, offered as a tool
// (mempalace_mailbox), a prompt (mailbox) and a resource
// (mempalace://mailbox) when a primary is configured.

// addMailbox registers the mailbox's tool, prompt and resource.
func (e *Edge) addMailbox() {
	e.box = &mailbox.Mailbox{Src: e, Wait: e.cfg.CallTimeout}
	if e.cfg.Identity != "" {
		e.wk = newWake(e.cfg.WakeWait, e.cfg.trustWait)
	}
	var schema map[string]any
	json.Unmarshal([]byte(mailbox.InputSchema), &schema) // a constant, parsed in the mailbox package's tests
	e.mu.Lock()
	e.listedFrom[mailbox.ToolName] = byLocal // the edge's own, never replaced
	e.mu.Unlock()
	e.server.AddTool(&mcp.Tool{Name: mailbox.ToolName, Description: mailbox.ToolDescription, InputSchema: schema}, e.handler)
	e.server.AddPrompt(&mcp.Prompt{Name: mailbox.PromptName, Description: mailbox.PromptDescription},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			r, err := e.owed(ctx, map[string]any{})
			if err != nil {
				return nil, err
			}
			e.toldByMailbox(r.Agent, r.Owed) // Text lists every one
			return &mcp.GetPromptResult{Description: mailbox.PromptDescription, Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: r.Text()}},
			}}, nil
		})
	e.server.AddResource(&mcp.Resource{URI: mailbox.ResourceURI, Name: mailbox.PromptName, Description: mailbox.PromptDescription, MIMEType: mailbox.ResourceMIMEType},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			r, err := e.owed(ctx, map[string]any{})
			if err != nil {
				return nil, err
			}
			shown := mailbox.Bounded(r)
			b, err := json.MarshalIndent(shown, "", "  ")
			if err != nil {
				return nil, err
			}
			e.toldByMailbox(shown.Agent, shown.Owed)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: mailbox.ResourceURI, MIMEType: mailbox.ResourceMIMEType, Text: string(mailbox.PrintableJSON(b))}}}, nil
		})
}

// mailboxCall answers the mempalace_mailbox tool.
func (e *Edge) mailboxCall(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	r, err := e.owed(ctx, c.argsMap())
	if err != nil {
		extra := map[string]any{"primary": e.remote.State()}
		agent, stream, limit, _ := mailbox.ParseArgs(c.argsMap(), e.cfg.Identity) // an error: agent is "", no kept view
		if kept := e.keptView(ctx, stream, limit); kept != nil && agent == e.cfg.Identity {
			extra["kept_view"] = kept // the session's agent's, of the stream and limit asked for: what its start told (wake.go)
		}
		return errorResult(err.Error(), extra), nil
	}
	if id, _ := mailbox.EventIDArg(c.argsMap()); id != "" { // a bad one: owed's error
		one, err := r.Only(id)
		if err != nil {
			return errorResult(err.Error(), nil), nil
		}
		e.toldByMailbox(one.Agent, one.Owed)
		return mailbox.ToolResult(one) // whole: the agent asked for it
	}
	shown := mailbox.Bounded(r)
	e.toldByMailbox(shown.Agent, shown.Owed)
	return mailbox.ToolResult(shown)
}

// owed derives the agent's owed set, counting its replies still on their
// way in the outbox as sent (outboxReplies); offline, from the last view
// (degraded). An ask whose reply is stuck in the outbox says so in its
// why. Its callers count as told (toldByMailbox) only the asks their
// answer shows: an event_id or the 64 KB bound leaves the others noted.
func (e *Edge) owed(ctx context.Context, args map[string]any) (mailbox.Result, error) {
	agent, stream, limit, err := mailbox.ParseArgs(args, e.cfg.Identity)
	if err != nil {
		return mailbox.Result{}, err
	}
	if id, err := mailbox.EventIDArg(args); err != nil {
		return mailbox.Result{}, err
	} else if id != "" {
		limit = 0 // the item asked for, wherever it is among them
	}
	replies := e.outboxReplies(ctx)
	r, err := e.box.Owed(ctx, agent, stream, limit, replies.sent)
	if err != nil {
		return r, fmt.Errorf("the mailbox could not be read: %w", err)
	}
	replies.MarkStuck(agent, r.Owed)
	if p := e.identityProblem(agent); p != "" {
		r.Warnings = append(r.Warnings, p)
	}
	return r, nil
}

// EventList is the mailbox's Source: the primary's event_list, through
// the same client as every other call (order=asc and writer where the
// primary's schema has them). A first read of a run does not wait for the
// primary's tool list: the schema's parameters as an earlier run heard
// them are kept in the outbox (keepListParams), so the read goes out
// right after the connect. Only an edge that never heard them lists the
// tools first (the list made at connect races it, and the tool cache
// keeps only the tools the local palace lacks), once a run: without
// order=asc a primary from 3.10 lists newest first, and a log longer than
// a page cannot be read so. A list that fails leaves the read to the
// pager's own check, and is made again at the next read.
func (e *Edge) EventList(ctx context.Context, args map[string]any) (json.RawMessage, error) {
	if e.remote == nil {
		return nil, errors.New("no primary is configured")
	}
	e.mu.Lock()
	_, known := e.primaryTools[mailbox.ListTool]
	tools := slices.Collect(maps.Values(e.primaryTools))
	e.mu.Unlock()
	params := mailbox.ListParams(tools)
	if !known && !e.primaryListed.Load() {
		if kept, ok := e.keptListParams(ctx); ok {
			params = kept
		} else if listed, err := e.remote.ListTools(ctx); err == nil {
			params = mailbox.ListParams(listed)
			e.primaryListed.Store(true)
		} else {
			e.log.Debug("the primary's event_list schema is not known; reading without it", "err", err)
		}
	}
	src := mailbox.ToolSource{Call: func(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
		// event_list is a read: it may be sent again (warmconn.WithReplayable)
		return e.remote.Call(warmconn.WithReplayable(ctx), newCall(&mcp.CallToolParams{Name: p.Name, Arguments: p.Arguments}).params, true)
	}, AscOrder: params["order"], Writer: params["writer"]}
	return src.EventList(ctx, args)
}

// metaListParams is the outbox meta key of the parameters the primary's
// event_list schema lists, as last heard (a JSON array of names).
const metaListParams = "event_list_params"

// keepListParams keeps the parameters of the primary's event_list, when
// its tool list has it, for the next run's first read (EventList).
func (e *Edge) keepListParams(tools []*mcp.Tool) {
	if e.outbox == nil || !slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t != nil && t.Name == mailbox.ListTool }) {
		return
	}
	b, _ := json.Marshal(slices.Sorted(maps.Keys(mailbox.ListParams(tools)))) // strings: they encode
	if kept, err := e.outbox.Meta(context.Background(), metaListParams); err == nil && kept == string(b) {
		return
	}
	if err := e.outbox.SetMeta(context.Background(), metaListParams, string(b)); err != nil {
		e.log.Debug("the primary's event_list schema not kept: the next run lists the primary's tools before its first read", "err", err)
	}
}

// keptListParams is what keepListParams kept (ok false: nothing).
func (e *Edge) keptListParams(ctx context.Context) (map[string]bool, bool) {
	if e.outbox == nil {
		return nil, false
	}
	s, err := e.outbox.Meta(ctx, metaListParams)
	var names []string
	if err != nil || s == "" || json.Unmarshal([]byte(s), &names) != nil {
		return nil, false // none kept (or unreadable): the tools are listed first
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, true
}

// Replies are the event_append and event_ack calls in an outbox's
// coordination lane, oldest first, every one of them (however many palace
// writes wait beside them): written on this devbox, not on the primary as
// far as the outbox knows. The edge's mailbox and `devbox-config mailbox`
// read them alike (ReadReplies), so both count a queued reply as sent.
type Replies struct {
	// sent count as sent: queued, in flight, or held until the
	// replication policy parses; each reaches the primary by itself.
	sent []map[string]any
	// stuck do not: dead (it never lands unless an operator retries it)
	// or in doubt (it may have landed; then the log read shows it and the
	// ask it answered is not owed there; if it did not, the ask is).
	stuck []stuckReply
}

// stuckReply is a reply dead or in doubt in the outbox.
type stuckReply struct {
	op   outbox.Op
	args map[string]any
}

// ReadReplies reads the replies in ob (a read-only Store will do: it
// writes nothing).
func ReadReplies(ctx context.Context, ob *outbox.Store) (Replies, error) {
	var out Replies
	ops, err := ob.PendingOn(ctx, catalogue.CoordinationLane)
	if err != nil {
		return out, err
	}
	for _, op := range ops {
		var a map[string]any
		if rec, _ := catalogue.Lookup(op.Tool); rec.Name != "event_append" && rec.Name != "event_ack" || json.Unmarshal(op.Payload, &a) != nil {
			continue
		}
		if op.State == outbox.Dead || op.State == outbox.InDoubt {
			out.stuck = append(out.stuck, stuckReply{op, a})
		} else {
			out.sent = append(out.sent, a)
		}
	}
	return out, nil
}

// Sent are the replies that count as sent: mailbox.WithPending's pending.
func (r Replies) Sent() []map[string]any { return r.sent }

// MarkStuck adds to the why of each of owed (agent's) that a stuck reply
// would answer that it is stuck in the outbox, and where to see it.
func (r Replies) MarkStuck(agent string, owed []mailbox.Item) {
	stuck := r.stuckOn(agent, owed)
	for i, it := range owed {
		if op, ok := stuck[it.Event.ID]; ok {
			owed[i].Why += "; " + stuckWhy(op)
		}
	}
}

// outboxReplies are the agent's replies in the outbox (none: no outbox,
// or it cannot be read, logged).
func (e *Edge) outboxReplies(ctx context.Context) Replies {
	if e.outbox == nil {
		return Replies{}
	}
	r, err := ReadReplies(ctx, e.outbox)
	if err != nil {
		e.log.Warn("the mailbox cannot see the replies still queued; it may show them as owed", "err", err)
	}
	return r
}

// stuckOn is, by ask id, the stuck reply that would answer each of owed
// (the agent's), by the mailbox's own join.
func (r Replies) stuckOn(agent string, owed []mailbox.Item) map[string]outbox.Op {
	if len(r.stuck) == 0 {
		return nil
	}
	asks := make([]mailbox.Event, len(owed))
	for i, it := range owed {
		asks[i] = it.Event
	}
	out := map[string]outbox.Op{}
	for _, s := range r.stuck {
		for _, id := range mailbox.Cleared(agent, asks, s.args) {
			out[id] = s.op
		}
	}
	return out
}

// stuckWhy says, in an owed item's why, that the agent's reply to it is
// stuck in the outbox (stuckOn) and where to see it.
func stuckWhy(op outbox.Op) string {
	if op.State == outbox.InDoubt {
		return fmt.Sprintf("your reply (op %s) is in doubt in this devbox's outbox and not on the log as read: it may not have landed; `devbox-config edge outbox list` shows it", op.Short())
	}
	return fmt.Sprintf("your reply (op %s) died in this devbox's outbox and never reached the log, so this is still owed; `devbox-config edge outbox list` shows why", op.Short())
}

// stuckMark is stuckWhy for an ask's line at session start and in notes
// ("": op is no stuck reply).
func stuckMark(op outbox.Op) string {
	switch op.State {
	case outbox.InDoubt:
		return "[your reply is in doubt: devbox-config edge outbox list]"
	case outbox.Dead:
		return "[your reply died: devbox-config edge outbox list]"
	}
	return ""
}
