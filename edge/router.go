package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/warmconn"
)

// localPalace is the router's view of the local palace server: the child
// supervisor (*Child), or in tests anything that answers tool calls.
type localPalace interface {
	// Call answers a tool call; a JSON-RPC error from the server is
	// returned as a *jsonrpc.Error, a server that is down as ErrLocalDown.
	Call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error)
	// Relay is Call on the wire's bytes: the result as sent, or the
	// JSON-RPC error.
	Relay(ctx context.Context, params json.RawMessage) (json.RawMessage, *jsonrpc.Error, error)
}

// primaryPalace is the router's view of the primary: its client
// (*Primary, with its breaker and warm transport), or a test's.
type primaryPalace interface {
	// Call answers a tool call within the call timeout; retry allows one
	// resend after an expired session (reads only).
	Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error)
	// CallLong is Call bounded by ctx instead (event_wait's long poll).
	CallLong(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error)
	// Up reports a closed breaker; State says why in words. Connected
	// reports a session open (the primary answered its connect).
	Up() bool
	Connected() bool
	State() string
	// Device is what the primary advertised of this device
	// (gateway/deviceinfo); false before it answered, or when it
	// advertises nothing (not a gateway).
	Device() (deviceinfo.Info, bool)
	// LastStatus is the HTTP status of the last answer (0: none): a
	// gateway's 5xx carries its device header, but says its primary
	// failed.
	LastStatus() int
	// RefreshDevice asks the primary again for what Device says; true:
	// an answer came.
	RefreshDevice(ctx context.Context) bool
	// ListTools lists the primary's tools now (what it lists is known to
	// the edge's registry afterwards).
	ListTools(ctx context.Context) ([]*mcp.Tool, error)
}

// handler is the SDK's way in for a tool call (before the fast lane opens).
func (e *Edge) handler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	e.setAgent(req.Session, false)
	res, err := e.route(ctx, newCall(&mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments, Meta: wire.ForwardMeta(req.Params.Meta)}))
	if err == nil && res != nil {
		notes, _ := e.takeNotes(ctx)
		for _, n := range notes {
			res.Content = append(res.Content, &mcp.TextContent{Text: n}) // a new ask, a dead write (wake.go)
		}
	}
	return res, err
}

// route answers one tool call by its catalogue route (RFC 001 §4.2),
// through the two interfaces above.
func (e *Edge) route(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	if e.childAnswers(c) {
		res, err := e.local(ctx, c) // pass-through, a local-only tool
		if err == nil && e.readsReconnect(c) {
			res = e.newPalaceReconnect(res)
		}
		return res, err
	}
	if rpcErr := c.refusal(); rpcErr != nil {
		return nil, rpcErr // before any palace or the outbox sees it
	}
	e.awaitFirstTheirs(ctx) // the local palace's texts of dropped edits taken first (theirs.go)
	if c.name == mailbox.ToolName && e.box != nil {
		return e.mailboxCall(ctx, c) // the edge's own tool
	}
	if e.primaryOnlyTool(c.name) {
		return e.primaryOnly(ctx, c, "a tool only the primary has")
	}
	switch c.tool.Route {
	case catalogue.MergedRead:
		return e.mergedRead(ctx, c)
	case catalogue.PrimaryFirst:
		return e.primaryFirst(ctx, c)
	case catalogue.ByID:
		return e.byID(ctx, c)
	case catalogue.LocalOnly, catalogue.Maintenance:
		return e.local(ctx, c)
	case catalogue.Destructive:
		return e.deleteCall(ctx, c)
	case catalogue.CoordinationRead:
		return e.primaryOnly(ctx, c, "the coordination log lives on the primary")
	case catalogue.CoordinationWrite:
		return e.coordinationWrite(ctx, c)
	}
	return e.write(ctx, c)
}

// local calls the child. A JSON-RPC error from it is the agent's answer as
// it is; a child that is down gives an error result, never a hang.
func (e *Edge) local(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	return localAnswer(e.localServer.Call(ctx, c.params))
}

// localAnswer is the agent's answer from the local palace's: a JSON-RPC
// error as it is (MemPalace's writer-lock refusal with what to do), a
// server that could not answer as an error result.
func localAnswer(res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	if err != nil {
		if rpcErr := peerError(err); rpcErr != nil {
			return nil, peerWriterFix(rpcErr)
		}
		return localDown(err), nil
	}
	return res, nil
}

// peerWriterFix adds what to do to MemPalace's refusal of a write while
// another of its processes holds the palace's writer lock (an flock):
// another session's edge on the same palace, or a mempalace-mcp left
// running (by an older edge, or by hand). MemPalace names the holder in
// its data's reason ("held by PID N (command)"). Any other error is
// returned as it is.
func peerWriterFix(e *jsonrpc.Error) *jsonrpc.Error {
	if e.Code != -32001 || !strings.HasPrefix(e.Message, "Peer MCP writer active") {
		return e
	}
	holder := "its PID is in this error's data.reason"
	if m := heldByPID.FindStringSubmatch(gjson.GetBytes(e.Data, "reason").Str); m != nil {
		holder = "PID " + m[1]
	}
	fixed := *e
	fixed.Message += " (devbox-config edge: nothing was written. Another MemPalace process holds this palace's writer lock (" + holder +
		"; `pgrep -af mempalace` lists them). Another session's edge on this palace holds it while that session runs; " +
		"a mempalace-mcp no session uses is left over: stop it (kill PID, kill -9 PID if it is stuck), then ask again.)"
	return &fixed
}

// heldByPID finds the holder's pid in MemPalace's peer-writer reason.
var heldByPID = regexp.MustCompile(`held by PID (\d+)`)

// localDown is the error result for a local palace that cannot answer.
func localDown(err error) *mcp.CallToolResult {
	if errors.Is(err, errAnswerTooLarge) { // it answered: it is not down
		return errorResult(err.Error(), map[string]any{"local": localState(err)})
	}
	msg := err.Error()
	if !errors.Is(err, ErrLocalDown) {
		msg = ErrLocalDown.Error() + ": " + msg
	}
	return errorResult(msg, map[string]any{"local": "down"})
}

// primaryOnly calls the primary; down -> a clear error result.
func (e *Edge) primaryOnly(ctx context.Context, c *call, why string) (*mcp.CallToolResult, error) {
	if e.remote == nil {
		return errorResult("no primary is configured ("+why+")", nil), nil
	}
	res, err := e.callPrimary(ctx, c, true)
	if err != nil {
		if rpcErr := peerError(err); rpcErr != nil {
			return nil, rpcErr
		}
		return errorResult(fmt.Sprintf("the primary is unreachable (%s): %v", why, err), map[string]any{"primary": e.remote.State()}), nil
	}
	return res, nil
}

// callPrimary calls the primary: a read may be sent twice (the warm
// transport's resend, warmconn.WithReplayable), and a long-poll is bounded by its
// own timeout plus the call timeout.
func (e *Edge) callPrimary(ctx context.Context, c *call, retry bool) (*mcp.CallToolResult, error) {
	if retry && c.tool.Reads {
		ctx = warmconn.WithReplayable(ctx)
	}
	if c.tool.Name == "event_wait" {
		ms := 60000.0
		if t, ok := c.argsMap()["timeout_ms"].(float64); ok {
			ms = min(t, 300000)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond+e.cfg.CallTimeout)
		defer cancel()
		return e.remote.CallLong(ctx, c.params, retry)
	}
	return e.remote.Call(ctx, c.params, retry)
}

// primaryFirst asks the primary; on any failure (down, an error, a tool
// it lacks) it answers from the local palace, marked degraded.
func (e *Edge) primaryFirst(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	own, missing, busy := e.ownFacts(ctx, c)
	if own != nil {
		return own, nil
	}
	res, err := e.callPrimary(ctx, c, true)
	unopenedHere := unopenedAnswer(res, err)
	if err == nil && !res.IsError && unopenedHere == "" {
		if missing != "" {
			return annotate(res, map[string]any{"source": "primary", "local": missing}, true), nil
		}
		return annotate(res, map[string]any{"source": "primary"}, false), nil
	}
	why := e.remote.State()
	switch rpcErr := peerError(err); {
	case unopenedHere == chromaMissing:
		why = primaryNoDrawers
	case unopenedHere != "":
		why = unopenedHere // its words, not its advice to repair (attack109 F1)
	case err == nil:
		why = "the primary answered an error: " + resultText(res)
	case rpcErr != nil:
		why = "the primary answered an error: " + rpcErr.Message
	}
	mark := map[string]any{"source": "local", "primary": why}
	var local *mcp.CallToolResult
	lerr := busy // ownFacts asked already: not again, behind itself
	if busy == nil {
		local, lerr = e.localRead(ctx, c, false)
	}
	if errors.Is(lerr, errLocalBusy) {
		if err == nil {
			return res, nil // the primary's own answer
		}
		return busyAndPrimaryDown(lerr, why), nil
	}
	local, lerr = localAnswer(local, lerr)
	if lerr == nil && local != nil {
		var empty bool
		if local, empty = e.emptyOverview(c, local); empty {
			mark["local"] = noDrawersYet // a devbox new to the fleet
		}
	}
	if unopenedHere != "" && (lerr != nil || local == nil || local.IsError || gjson.Get(resultText(local), "error").Exists()) {
		// Neither palace can open its drawers (a fleet new to memory):
		// MemPalace's error, not its advice to repair or to init and mine.
		return annotate(jsonResult(map[string]any{"error": unopenedHere}, false), mark, unopenedHere != chromaMissing), nil
	}
	if lerr != nil || local == nil || local.IsError {
		if err == nil {
			return res, nil // both failed: the primary's own answer
		}
		return local, lerr
	}
	return annotate(e.marks().result(local, c.tool.Records, origin.PalaceLocal), e.notFiled(ctx, c, mark), unopenedHere != chromaMissing), nil
}

// unopenedAnswer is the primary's answer's error when it is MemPalace's
// unopened-palace one (unopened), "" otherwise.
func unopenedAnswer(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return ""
	}
	if u := gjson.Get(resultText(res), "error").String(); unopened(u) {
		return u
	}
	return ""
}

// ownFacts answers a knowledge-graph read from the local palace while
// this device's own KG writes about the entity read are not all on the
// primary yet: the local palace has them and the primary does not, and
// the agent reads what it just wrote (read-your-writes). A read about
// another entity is the primary's, so a fact stuck unsent hides nothing
// else the fleet knows. A read that names no entity (kg_stats, a
// kg_timeline of everything) counts every unsent KG write. The local
// palace has the call timeout to answer (mempalace-mcp answers one call
// at a time, and a mine takes minutes), and is not asked while it is busy
// (localBusy: at a mine; past the timeout at another call, while the
// primary is up); with it down, the local answer is the only one, and has
// as long as the local palace is at no other call.
// res nil: the primary answers, and missing, if not "", says what its
// answer lacks (the local palace could not answer: busy, down, an error);
// busy is the local palace's being busy, if it was.
func (e *Edge) ownFacts(ctx context.Context, c *call) (res *mcp.CallToolResult, missing string, busy error) {
	if c.tool.Wings != catalogue.KnowledgeGraph || e.outbox == nil {
		return nil, "", nil
	}
	entity, _ := c.argsMap()["entity"].(string)
	n, err := e.outbox.UnsentFacts(ctx, entity)
	if err != nil || n == 0 {
		return nil, "", nil
	}
	about := ""
	if catalogue.EntityID(entity) != "" {
		about = fmt.Sprintf(" about %q", entity)
	}
	why := fmt.Sprintf("this device's knowledge-graph writes%s are not on the primary yet (%d in the outbox)", about, n) + e.deadFactsWhy(ctx, entity)
	res, err = e.localRead(ctx, c, e.remote.Up())
	switch {
	case errors.Is(err, errLocalBusy):
		return nil, fmt.Sprintf("%v; %s, so this answer lacks them", err, why), err
	case err != nil:
		return nil, fmt.Sprintf("the local palace did not answer (%v); %s, so this answer lacks them", err, why), nil
	case res == nil || res.IsError:
		return nil, fmt.Sprintf("the local palace answered an error (%s); %s, so this answer lacks them", resultText(res), why), nil
	}
	return annotate(e.marks().result(res, c.tool.Records, origin.PalaceLocal), e.notFiled(ctx, c, map[string]any{"source": "local", "why": why}), false), "", nil
}

func resultText(res *mcp.CallToolResult) string {
	if res != nil && len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return "(no text)"
}

// byID asks the local palace (as a merged read does, localRead), then the
// primary for what it lacks (byIDMissing); a busy or down local palace's
// part is the primary's, marked degraded.
func (e *Edge) byID(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	res, err := e.localRead(ctx, c, e.remote.Up())
	return e.byIDFrom(ctx, c, res, err)
}

// byIDFrom is byID from the local palace's answer (res, err); a
// get_drawers whose answer was too large is read again in halves
// (drawersInHalves).
func (e *Edge) byIDFrom(ctx context.Context, c *call, res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	if errors.Is(err, errAnswerTooLarge) && c.tool.Name == "get_drawers" {
		res, err = e.drawersInHalves(ctx, c, err)
	}
	var busy error
	switch {
	case err != nil && peerError(err) == nil:
		busy, res = err, nil // busy, or down
	case err != nil || res == nil:
		return localAnswer(res, err)
	}
	return e.byIDMissing(ctx, c, res, busy), nil
}

// busyMark is mark saying the local palace was busy (busy non-nil).
func busyMark(mark map[string]any, busy error) map[string]any {
	if busy != nil {
		mark["local"] = busy.Error()
	}
	return mark
}

// localSlots are get_drawers' ids and the local palace's answer for each
// (none while it is busy; none for an empty palace); not ok when its
// answer is another error or not 3.11's shape.
func (e *Edge) localSlots(c *call, res *mcp.CallToolResult, busy error) ([]string, []json.RawMessage, bool) {
	raw, _ := c.argsMap()["drawer_ids"].([]any)
	ids := make([]string, len(raw))
	for i, id := range raw {
		ids[i], _ = id.(string)
	}
	slots := make([]json.RawMessage, len(ids))
	if busy != nil {
		return ids, slots, true
	}
	t, _ := objectText(res)
	results := gjson.Get(t, "results").Array()
	if len(results) != len(ids) {
		return ids, slots, e.lacksLocally(res) // an empty palace: none here
	}
	for i, r := range results {
		slots[i] = json.RawMessage(r.Raw)
	}
	return ids, slots, true
}

// drawersAnswer is get_drawers' answer of slots, saying how many the
// primary withheld (a gateway's untrusted_withheld) when it did.
func drawersAnswer(slots []json.RawMessage) *mcp.CallToolResult {
	errs, withheld := 0, int64(0)
	for _, s := range slots {
		if gjson.GetBytes(s, "error").Exists() {
			errs++
		}
		withheld += gjson.GetBytes(s, "untrusted_withheld").Int()
	}
	m := map[string]any{"results": slots, "count": len(slots), "errors": errs}
	if withheld > 0 {
		m["untrusted_withheld"] = withheld
	}
	return jsonResult(m, false)
}
