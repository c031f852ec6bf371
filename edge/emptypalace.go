package edge

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/palacefiles"
)

// noDrawersYet is what a merged answer's edge.local says of a local
// palace that holds no drawers yet.
const noDrawersYet = "no drawers yet"

// chromaMissing is MemPalace's (3.11) whole error for a drawer read of a
// palace whose database file does not exist yet: no drawer was ever
// filed there. (Its "No palace found" and "Backend open failed" are also
// a broken palace's, so they stay errors.)
const chromaMissing = "Chroma database missing"

// primaryNoDrawers is what a merged answer's edge.primary says of a
// primary that answered chromaMissing: new to the fleet, most likely, but
// its words stay, as a primary whose database file went missing answers
// the same (review33 R3).
const primaryNoDrawers = "no drawers yet (the primary answers \"Chroma database missing\": no drawer filed there yet, or its database file is gone)"

// unopened reports MemPalace's (3.11) error for a drawer read of a palace
// it cannot open the drawers of: one new (no drawer filed yet, after a
// search there) or broken; its advice (init and mine, or repair) is not
// for an agent on a devbox new to the fleet.
func unopened(msg string) bool {
	return msg == chromaMissing || msg == "No palace found" || strings.HasPrefix(msg, "Backend open failed")
}

// localEmpty reports a local palace that holds no drawers yet
// (palacefiles.Empty): MemPalace answers its drawer reads with errors that
// mean "nothing here", on a devbox new to the fleet until its first write.
// Files that cannot tell are not read as empty.
func (e *Edge) localEmpty() bool {
	empty, err := palacefiles.Empty(e.cfg.Palace)
	if err != nil {
		e.log.Debug("whether the local palace holds drawers is unknown; its error stands", "err", err)
	}
	return err == nil && empty
}

// reconnectTool is MemPalace's tool that reopens the palace
// (newPalaceReconnect).
const reconnectTool = "reconnect"

// readsReconnect reports a reconnect whose answer route reads
// (newPalaceReconnect) rather than relays: an edge's, not pass-through's.
func (e *Edge) readsReconnect(c *call) bool {
	return c.tool.Name == reconnectTool && !e.cfg.PassThrough()
}

// newPalaceReconnect is reconnect's answer from a local palace that holds
// no drawers yet (localEmpty): MemPalace's words that it cannot open the
// drawers (unopened) stand, its advice to repair (hint) and the palace's
// path (details) go, and edge.local says "no drawers yet" (attack113 F6).
// Any other answer, a damaged palace's too, is as it came.
func (e *Edge) newPalaceReconnect(res *mcp.CallToolResult) *mcp.CallToolResult {
	t, ok := objectText(res)
	if !ok || !unopened(gjson.Get(t, "message").String()) || !e.localEmpty() {
		return res
	}
	out, err := sjson.Delete(t, "hint")
	if err == nil {
		out, err = sjson.Delete(out, "details")
	}
	if err != nil {
		return res // not expected of an object text (objectText): as it came
	}
	return annotate(textResult([]byte(out), res.IsError, res.Meta), map[string]any{"source": "local", "local": noDrawersYet}, false)
}

// notFound reports MemPalace's error for a drawer id it does not hold
// ("Drawer not found: <id>").
func notFound(msg string) bool { return strings.HasPrefix(msg, "Drawer not found") }

// lacksLocally reports a local answer that means the drawer is not in the
// local palace: "Drawer not found", or any error from a palace that holds
// no drawers yet.
func (e *Edge) lacksLocally(res *mcp.CallToolResult) bool {
	t, _ := objectText(res)
	msg := gjson.Get(t, "error")
	return notFound(msg.String()) || msg.Exists() && e.localEmpty()
}

// emptyAnswer is a merged read's answer of shape from a palace that holds
// no drawers: what MemPalace answers once it has a drawer collection, and
// nothing in it.
func emptyAnswer(shape catalogue.Filter, args map[string]any) map[string]any {
	switch shape {
	case catalogue.FilterHits:
		return map[string]any{"query": args["query"], "results": []any{}}
	case catalogue.FilterDrawers:
		offset, limit := drawerWindow(args)
		return map[string]any{"drawers": []any{}, "count": 0, "offset": offset, "limit": limit}
	case catalogue.FilterDiary:
		return map[string]any{"agent": args["agent_name"], "entries": []any{}, "message": "No diary entries yet."}
	case catalogue.FilterMatches:
		return map[string]any{"is_duplicate": false, "matches": []any{}}
	}
	return map[string]any{}
}

// emptyOverview is the local answer to a primary-first read when it is an
// error from a palace that holds no drawers yet (rewritten true): for
// status, list_wings, list_rooms and get_taxonomy what MemPalace 3.11.0
// answers for a palace with an empty drawer collection
// (mcp_server/tools_read.py), for any other read MemPalace's error alone
// if it names an unopened palace (graph_stats, find_tunnels, traverse,
// follow_tunnels: attack110 F1); never its advice to repair the palace,
// nor its path. status has the counts only: the protocol and AAAK texts
// MemPalace sends with them are its own. A palace whose files cannot tell
// (localEmpty) keeps its error whole.
func (e *Edge) emptyOverview(c *call, res *mcp.CallToolResult) (_ *mcp.CallToolResult, rewritten bool) {
	msg := gjson.Get(resultText(res), "error")
	if !msg.Exists() {
		return res, false
	}
	var m map[string]any
	switch c.tool.Name {
	case "status":
		m = map[string]any{"total_drawers": 0, "wings": map[string]any{}, "rooms": map[string]any{}}
	case "list_wings":
		m = map[string]any{"wings": map[string]any{}}
	case "list_rooms":
		wing, _ := c.argsMap()["wing"].(string)
		if strings.TrimSpace(wing) == "" {
			wing = "all"
		}
		m = map[string]any{"wing": wing, "rooms": map[string]any{}}
	case "get_taxonomy":
		m = map[string]any{"taxonomy": map[string]any{}}
	default:
		if !unopened(msg.String()) {
			return res, false
		}
		m = map[string]any{"error": msg.String()}
	}
	if !e.localEmpty() {
		return res, false
	}
	return jsonResult(m, false), true
}

// notFoundHere is a by-id read's local answer that lacksLocally: a palace
// that holds no drawers yet answers as a populated one does for a drawer
// it lacks ("Drawer not found: <id>"), not with MemPalace's advice to
// repair it (rewritten true). get_drawers, and any other answer, is as it
// came.
func notFoundHere(c *call, res *mcp.CallToolResult) (_ *mcp.CallToolResult, rewritten bool) {
	id, ok := c.argsMap()["drawer_id"].(string)
	if !ok || notFound(gjson.Get(resultText(res), "error").String()) {
		return res, false
	}
	return jsonResult(map[string]any{"error": "Drawer not found: " + id}, false), true
}
