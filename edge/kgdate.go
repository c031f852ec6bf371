package edge

import (
	"encoding/json"
	"time"

	"github.com/tidwall/sjson"
)

// dated gives a kg_supersede without "at" (absent or null), or a
// kg_invalidate without "ended" (absent, null or ""), the instant
// MemPalace would date it by its own clock: now to the second in UTC (a
// supersede's boundary), today's local date (an invalidate's end). Both
// palaces then apply the one instant: the local palace now, the primary
// when the op reaches it, which by its own clock would date the change at
// delivery (a day late after a day offline; attack99 F4). Spliced into
// the agent's bytes, never re-encoded, before the op is made, so the op
// (and its id) is the dated write from the start.
func (c *call) dated(now time.Time) {
	var key, value string
	switch c.tool.Name {
	case "kg_supersede":
		key, value = "at", now.UTC().Format("2006-01-02T15:04:05Z")
	case "kg_invalidate":
		key, value = "ended", now.Format(time.DateOnly)
	default:
		return
	}
	switch v, ok := c.argsMap()[key]; {
	case !ok || v == nil:
	case v == "" && key == "ended": // MemPalace's `ended or date.today()`
	default:
		return // the agent's own date (or one MemPalace refuses): as written
	}
	out, err := sjson.SetBytes(append([]byte(nil), c.raw()...), key, value)
	if err != nil {
		return // not an object: the local palace refuses it
	}
	c.params.Arguments = json.RawMessage(out)
	c.args = nil
}
