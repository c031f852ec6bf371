package edge

// Origins through merged reads (issue 28, gateway/origin): every record a
// merged read returns says which palace answered with it in its origin's
// palace member. The primary's origin object (a gateway's stamp) is kept
// as it came, palace "primary" or "both" added; a record only the local
// palace's answer holds is marked as this device's own (palace "local").
// The palace member says which answer held a record, not which palaces
// keep it: the primary's answer is one page.

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/jsondepth"
)

// marks is how one merged read marks its records: this device's own
// origin (from the device the primary advertises, "unknown" when it
// advertises none) and whether a primary record without an origin is
// trusted (what the reading device trusts of "unknown").
type marks struct {
	own            []byte // the local origin, as JSON
	device         string // this device's id ("": the primary advertises none)
	unknownTrusted bool
	// ownUntrusted is the local origin marked untrusted, and
	// untrustedWing the wing a local record of which gets it: the
	// instruction wing on a device that does not write it (not admin, or
	// an admin whose write globs do not match it: the gateway never takes
	// its writes there), "" otherwise.
	ownUntrusted  []byte
	untrustedWing string
	// copies is the copy on the primary of each diary entry of the
	// local answer the outbox knows, by the stamp of the entry's id
	// (Edge.ownCopies): the entry pairs with that copy alone.
	copies map[string]outbox.EntryCopy
	// writtenHere is each drawer a write of this device's not landed on
	// the primary names (Edge.writtenHere): the primary's text of it is
	// not this device's, so a search gives way to the local palace's.
	writtenHere map[string]bool
	// took is the writer of each drawer whose local copy holds a text
	// taken from the primary after a drop (Edge.took), by drawer id, and
	// trusts whether this device trusts a writer.
	took   map[string]origin.Origin
	trusts func(device string) bool
}

// marks reads the device the primary advertised (gateway/deviceinfo), or
// an earlier run heard (device.go).
func (e *Edge) marks() marks {
	in, _ := e.device()
	m := marksFor(in)
	if took := e.took.Load(); took != nil {
		m.took = *took
	}
	return m
}

// tookOnly is m marking only the drawers whose text the local palace
// took from the primary (the rest of a local answer as it came): a
// get_drawer the local palace answers is relayed without an origin
// (fastlane.go), but not one of those, whose words are not this device's.
func (m marks) tookOnly() marks {
	m.own, m.ownUntrusted = nil, nil
	return m
}

func marksFor(in deviceinfo.Info) marks {
	own := origin.Origin{Device: in.ID, Label: in.Label, Trusted: true, Palace: origin.PalaceLocal}
	if own.Device == "" {
		own = origin.Origin{Device: origin.Unknown, Trusted: true, Palace: origin.PalaceLocal}
	}
	m := marks{own: own.AppendJSON(nil), device: in.ID, unknownTrusted: in.TrustsDevice(origin.Unknown), trusts: in.TrustsDevice}
	if writes, _ := in.Writes(in.InstructionWing); !writes && in.InstructionWing != "" {
		own.Trusted = false
		m.ownUntrusted, m.untrustedWing = own.AppendJSON(nil), in.InstructionWing
	}
	return m
}

// local is the origin of a local record rec: this device's, untrusted in
// the instruction wing on a device that does not write it (never sent:
// the gateway takes no write there from it); a drawer whose text the
// local palace took from the primary, its writer's.
func (m marks) local(rec string) []byte {
	if len(m.took) > 0 {
		id := gjson.Get(rec, "drawer_id").Str
		if id == "" {
			id = gjson.Get(rec, "id").Str // a check_duplicate match's
		}
		if by, ok := m.took[id]; ok {
			by.Trusted, by.Palace = m.trusts == nil || m.trusts(by.Device), origin.PalaceLocal
			return by.AppendJSON(nil)
		}
	}
	if m.untrustedWing != "" && strings.TrimSpace(gjson.Get(rec, "wing").String()) == m.untrustedWing {
		return m.ownUntrusted
	}
	return m.own
}

// primary is the origin of a primary record whose own origin is raw (the
// member's JSON, "" when absent): the gateway's object with palace set,
// or an unknown origin when it has none (a primary without a gateway).
func (m marks) primary(raw, palace string) []byte {
	if o := gjson.Parse(raw); o.IsObject() && o.Get("device").Type == gjson.String {
		if out, err := sjson.SetBytes([]byte(raw), "palace", palace); err == nil {
			return out
		}
	}
	return origin.Origin{Device: origin.Unknown, Trusted: m.unknownTrusted, Palace: palace}.AppendJSON(nil)
}

// pairs reports whether a primary record whose origin names device dev
// ("" none) may be this device's own copy of a local record with the same
// text, merged with it as one (palace both): not one another device wrote
// (the gateway stamps its writer), which stays a record of its own. One
// with no origin (a primary without a gateway, a record from before it)
// may, and so may any when this device's id is not known.
func (m marks) pairs(dev string) bool {
	return m.device == "" || dev == "" || dev == origin.Unknown || dev == m.device
}

// ownCopy is the copy on the primary of the local diary entry id, when
// the outbox names it (known; c.ID "": the entry never reached it).
func (m marks) ownCopy(id string) (c outbox.EntryCopy, known bool) {
	stamp, _, ok := catalogue.DiaryEntryID(id)
	if !ok {
		return c, false
	}
	c, known = m.copies[stamp]
	return c, known
}

// copyID is the id on the primary of the local diary entry id's copy,
// when the outbox names one other than id ("": none).
func (m marks) copyID(id string) string {
	if c, known := m.ownCopy(id); known && c.ID != id {
		return c.ID
	}
	return ""
}

// writtenHereOnPrimary is the ids on the primary of the drawers written
// here (writtenHere): each one's own, and for a diary entry its copy's
// (copies), the id the primary keeps it under.
func (m marks) writtenHereOnPrimary() map[string]bool {
	ids := maps.Clone(m.writtenHere)
	for id := range m.writtenHere {
		if c, known := m.ownCopy(id); known && c.ID != "" {
			ids[c.ID] = true
		}
	}
	return ids
}

// copied reports a primary diary entry's timestamp ts that the outbox
// names as the copy of a local entry of the answer.
func (m marks) copied(ts string) bool {
	for _, c := range m.copies {
		if c.Timestamp == ts && ts != "" {
			return true
		}
	}
	return false
}

// text marks every record of an answer's text (catalogue.Records says
// where they are) as the palace's: "local" or "primary". What cannot be
// marked is left as it is.
func (m marks) text(text string, recs catalogue.Records, palace string) string {
	mark := func(rec string) string {
		o := m.local(rec)
		if palace != origin.PalaceLocal {
			o = m.primary(gjson.Get(rec, origin.Key).Raw, palace)
		}
		if o == nil {
			return rec // tookOnly's: not a taken drawer
		}
		out, err := sjson.SetRaw(rec, origin.Key, string(o))
		if err != nil {
			return rec
		}
		return out
	}
	if recs.Object() == "." {
		if gjson.Parse(text).IsObject() && !gjson.Get(text, "error").Exists() {
			return mark(text)
		}
		return text
	}
	if recs.IsList() { // the answer is the list
		if arr := gjson.Parse(text); arr.IsArray() {
			return markEach(arr, mark)
		}
		return text
	}
	for _, list := range listPaths(text, recs) {
		arr := gjson.Get(text, list)
		if !arr.IsArray() {
			continue
		}
		if marked, err := sjson.SetRaw(text, list, markEach(arr, mark)); err == nil {
			text = marked
		}
	}
	return text
}

// markEach is the list arr with each of its objects marked.
func markEach(arr gjson.Result, mark func(string) string) string {
	out := make([]byte, 0, len(arr.Raw)+256)
	out = append(out, '[')
	i := 0
	arr.ForEach(func(_, v gjson.Result) bool {
		if i > 0 {
			out = append(out, ',')
		}
		i++
		if v.IsObject() {
			out = append(out, mark(v.Raw)...)
		} else {
			out = append(out, v.Raw...)
		}
		return true
	})
	return string(append(out, ']'))
}

// listPaths are the paths of text's lists of records: recs.Lists, or
// those in each object of its list recs.Within (a checkpoint's
// duplicates.0.matches, duplicates.1.matches, ...).
func listPaths(text string, recs catalogue.Records) []string {
	within := recs.Within()
	if within == "" {
		return recs.Lists()
	}
	var paths []string
	for i := range len(gjson.Get(text, within).Array()) {
		for _, list := range recs.Lists() {
			paths = append(paths, within+"."+strconv.Itoa(i)+"."+list)
		}
	}
	return paths
}

// both is the record kept for one both palaces returned, with the origin
// of the primary's copy (already marked) and palace "both"; kept as it is
// (this device's, palace "local") when the two texts differ: its text is
// this palace's alone (an update not on the primary yet, or refused).
func both(kept, fromPrimary map[string]any) map[string]any {
	for _, k := range []string{"text", "content", "content_preview"} {
		if a, ok := kept[k]; ok && fromPrimary[k] != nil && fromPrimary[k] != a {
			return kept
		}
	}
	c := maps.Clone(kept)
	o, ok := fromPrimary[origin.Key].(map[string]any)
	if !ok {
		return c
	}
	o = maps.Clone(o)
	o["palace"] = origin.PalaceBoth
	c[origin.Key] = o
	return c
}

// objectMap decodes an answer's JSON object text (empty when it is not
// one, or does not decode whole).
func objectMap(text string) map[string]any {
	var m map[string]any
	if json.Unmarshal([]byte(text), &m) != nil || m == nil {
		return map[string]any{}
	}
	return m
}

// result is res with the records of its object text (follow_tunnels' and
// list_tunnels': its array) marked (text); res itself when it holds none,
// or nothing changed.
func (m marks) result(res *mcp.CallToolResult, recs catalogue.Records, palace string) *mcp.CallToolResult {
	t, ok := objectText(res)
	if !ok && recs.IsList() {
		t = resultText(res)
		ok = jsondepth.ValidString(t) && gjson.Parse(t).IsArray()
	}
	if out := m.text(t, recs, palace); ok && out != t {
		c := *res
		c.Content = []mcp.Content{&mcp.TextContent{Text: out}}
		return &c
	}
	return res
}
