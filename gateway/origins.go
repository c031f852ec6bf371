package gateway

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// errCLIUntrusted: search's cli_compatible answer carries the hits
// again as the CLI's text, which has no origins and cannot be cut by
// trust, so a device that names a trusted set cannot have it.
var errCLIUntrusted = &denial{ruleCLIUntrusted, "cli_compatible answers with the CLI's text, which says nothing of who wrote each hit: a device that names a trusted set gets its hits without it"}

// annotator is the origin step of one answer for one reading device:
// each record gains an "origin" (gateway/origin), looked up in the
// provenance index by what the record holds, says whether the device
// trusts its writer (and, for a joined record, the admin via which it
// came), and is left out when the device withholds what it
// does not trust.
type annotator struct {
	d        *Device
	prov     *provenance.Store
	rec      catalogue.Records
	withhold bool
	agent    string // a diary answer's agent
	withheld int    // records left out of the answer's first list
}

// annotatorFor is the origin step of t's answers for d (nil: t's answers
// carry no records).
func (s *Server) annotatorFor(d *Device, t catalogue.Tool) *annotator {
	if t.Records == catalogue.NoRecords || s.prov == nil {
		return nil
	}
	if err := s.prov.Fresh(); err != nil {
		s.Log.Error("provenance index not read again (a restore's origins wait for the next poll)", "err", err)
	}
	return &annotator{d: d, prov: s.prov, rec: t.Records, withhold: d.Untrusted == UntrustedWithhold}
}

// keyFields names, per kind of record, the members its index key is
// made of (catalogue.Records).
var keyFields = map[catalogue.Records][]string{
	catalogue.RecordMatches:    {"id"},
	catalogue.RecordCheckpoint: {"id"},
	catalogue.RecordEvents:     {"id"},
	catalogue.RecordArtifact:   {"id"},
	catalogue.RecordTunnels:    {"id"},
	catalogue.RecordDiary:      {"timestamp", "content"},
	catalogue.RecordFacts:      {"subject", "predicate", "object", "valid_from", "valid_to"},
	catalogue.RecordTimeline:   {"subject", "predicate", "object", "valid_from", "valid_to"},
}

// record is what the filter and the origin step read of one record, in
// one pass over its members: the members visibility is decided by (wing,
// to_agent, from_agent, and how often they appear), the index key's
// fields, and whether it has an origin already or is an error item: an
// "error" and at most a drawer_id besides, as get_drawers' item for an id
// that does not resolve (anything more is a record with an error member).
type record struct {
	f                 [5]string
	hasOrigin, failed bool
	wing, to, from    string
	alsoIn            int  // members named also_in (a search hit's folded copies)
	twice             bool // wing, to_agent, from_agent or a key field appears twice
}

// readRecord reads it once: names are the members its index key is made
// of (none without an origin step).
func readRecord(it gjson.Result, names []string) record {
	var r record
	var seen [3]bool    // wing, to_agent, from_agent: a value of any type, "" too
	var seenKey [5]bool // the key fields, as seen
	more := false       // a member but error and drawer_id: not an error item
	it.ForEach(func(k, v gjson.Result) bool {
		more = more || (k.Str != "error" && k.Str != "drawer_id")
		var into *string
		at := 0
		switch k.Str {
		case "wing":
			into = &r.wing
		case "to_agent":
			into, at = &r.to, 1
		case "from_agent":
			into, at = &r.from, 2
		case origin.Key:
			r.hasOrigin = true
		case "error":
			r.failed = true
		case "also_in":
			r.alsoIn++
		default:
			for i, n := range names {
				if k.Str == n {
					r.twice = r.twice || seenKey[i]
					seenKey[i], r.f[i] = true, v.Str
				}
			}
		}
		if into != nil {
			r.twice = r.twice || seen[at]
			seen[at] = true
			if v.Type == gjson.String {
				*into = v.Str
			}
		}
		return true
	})
	r.failed = r.failed && !more
	return r
}

// keyNames are the members of a record the annotator's index key is made
// of (none for a nil annotator: no origin step).
func (a *annotator) keyNames() []string {
	if a == nil {
		return nil
	}
	if names, ok := keyFields[a.rec]; ok {
		return names
	}
	return []string{"drawer_id"}
}

func (a *annotator) read(it gjson.Result) record { return readRecord(it, a.keyNames()) }

// key is the index key of one record (ok false: the record says too
// little to be found, as a 3.6.0 search hit without drawer_id).
func (a *annotator) key(r record) (provenance.Key, bool) {
	switch a.rec {
	case catalogue.RecordMatches, catalogue.RecordCheckpoint:
		return provenance.Drawer(catalogue.DrawerOfRow(r.f[0])), r.f[0] != ""
	case catalogue.RecordEvents, catalogue.RecordArtifact:
		return provenance.Event(r.f[0]), r.f[0] != ""
	case catalogue.RecordDiary:
		return provenance.Diary(a.agent, r.f[0], r.f[1]), a.agent != ""
	case catalogue.RecordFacts, catalogue.RecordTimeline:
		return provenance.Fact(r.f[0], r.f[1], r.f[2], r.f[3], r.f[4]), r.f[0] != ""
	case catalogue.RecordTunnels:
		return provenance.Tunnel(r.f[0]), r.f[0] != ""
	}
	return provenance.Drawer(r.f[0]), r.f[0] != ""
}

// originOf is who wrote one record, as the reading device gets it.
func (a *annotator) originOf(r record) origin.Origin { return a.originAt(a.key(r)) }

// originAt is who wrote the record of key k (ok false: none, unknown), as
// the reading device gets it.
func (a *annotator) originAt(k provenance.Key, ok bool) origin.Origin {
	o := origin.Origin{Device: origin.Unknown}
	if ok {
		if st, known := a.prov.Lookup(k); known {
			o = origin.Origin{Device: st.Device, Label: st.Label, Agent: st.Agent, Via: st.Via, At: st.At.UTC().Format(time.RFC3339Nano)}
		}
	}
	o.Trusted = a.d.trustsOrigin(o)
	o.Removed, o.Unlisted = a.d.goneOf(o)
	return o
}

// item appends one record to dst with its origin added (keep false:
// withheld, nothing appended). A record that already has an "origin", or
// a member read twice (a client's parser may read the copy the look-up
// did not), is an answer shape the gateway does not know; an item that
// is an error (get_drawers' missing ids) is appended as it is.
func (a *annotator) item(dst []byte, it gjson.Result, r record) (out []byte, keep bool, err error) {
	switch {
	case r.hasOrigin, r.twice:
		return dst, false, errUnknownShape
	case r.failed:
		return append(dst, it.Raw...), true, nil
	}
	o := a.originOf(r)
	if !o.Trusted && a.withhold {
		return dst, false, nil
	}
	// "origin" goes last: before the closing brace and the space before it.
	obj := it.Raw
	body := strings.TrimRight(obj[:strings.LastIndexByte(obj, '}')], " \t\r\n")
	dst = append(dst, body...)
	if body != "{" {
		dst = append(dst, ", "...)
	}
	dst = append(dst, `"`+origin.Key+`": `...)
	dst = o.AppendJSON(dst)
	return append(dst, obj[len(body):]...), true, nil
}

// walk rebuilds a list of records, each read once, through keep (the
// visibility cut; nil: every one) and the annotator; kept is how many are
// in it.
func (a *annotator) walk(list gjson.Result, keep func(record) (bool, bool), each func(r record, raw []byte) ([]byte, bool)) (out []byte, kept int, err error) {
	out = make([]byte, 1, len(list.Raw)+len(list.Raw)/4+64) // room for the origins
	out[0] = '['
	names := a.keyNames()
	list.ForEach(func(_, it gjson.Result) bool {
		if !it.IsObject() {
			err = errUnknownShape
			return false
		}
		r := readRecord(it, names)
		if keep != nil {
			visible, ok := keep(r)
			if !ok {
				err = errUnknownShape
				return false
			}
			if !visible {
				return true
			}
		}
		if kept > 0 {
			out = append(out, ',')
		}
		mark := len(out)
		if a == nil {
			out = append(out, it.Raw...)
		} else {
			var ok bool
			if out, ok, err = a.item(out, it, r); err != nil {
				return false
			} else if !ok {
				a.withheld++
				out = out[:max(mark-1, 1)] // the comma too
				return true
			}
		}
		if each != nil {
			raw, ok := each(r, out[mark:])
			if !ok {
				err = errUnknownShape
				return false
			}
			out = append(out[:mark], raw...)
		}
		kept++
		return true
	})
	return append(out, ']'), kept, err
}

// answer is the origin step of an answer the filter did not cut: m (of
// members ms) with each record annotated and, if any was withheld, its
// count recounted and "untrusted_withheld" added. An error answer is
// passed as it is.
func (a *annotator) answer(m gjson.Result, ms []member) ([]byte, error) {
	if a.rec.IsList() {
		return a.list(m)
	}
	if obj := a.rec.Object(); obj != "" {
		return a.object(m, obj)
	}
	for _, mb := range ms {
		if mb.name == "agent" {
			a.agent = catalogue.PythonLower(strings.TrimSpace(mb.v.Str))
		}
	}
	walked, counted, err := a.lists(ms)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(m.Raw)+len(m.Raw)/4)
	out = append(out, '{')
	for i, mb := range ms {
		raw := walked[i]
		switch {
		case raw != nil:
		case (mb.name == "count" || mb.name == "showing") && a.withheld > 0:
			raw = strconv.AppendInt(nil, int64(counted), 10)
		default:
			raw = []byte(mb.v.Raw)
		}
		if len(out) > 1 {
			out = append(out, ", "...)
		}
		out = append(appendQuoted(out, []byte(mb.name)), ": "...)
		out = append(out, raw...)
	}
	return a.closeAnswer(out), nil
}

// object is the origin step of an answer that is one record (obj ".")
// or holds one under obj.
func (a *annotator) object(m gjson.Result, obj string) ([]byte, error) {
	rec := m
	if obj != "." {
		rec = m.Get(obj)
	}
	if !rec.IsObject() || (obj == "." && m.Get("error").Exists() && !m.Get("drawer_id").Exists()) {
		return []byte(m.Raw), nil // an error answer (get_drawer's has no drawer_id): no record
	}
	raw, keep, err := a.item(nil, rec, a.read(rec))
	switch {
	case err != nil:
		return nil, err
	case !keep:
		return a.withheldOne(rec), nil
	case obj == ".":
		return raw, nil
	}
	return sjson.SetRawBytes([]byte(m.Raw), obj, raw)
}

// lists walks the answer's lists of records (and its Within member),
// member by member: walked[i] is member i walked (nil: not a list of
// records), counted the records kept of the first list.
func (a *annotator) lists(ms []member) (walked [][]byte, counted int, err error) {
	lists := a.rec.Lists()
	walked = make([][]byte, len(ms))
	for i, mb := range ms {
		if within := a.rec.Within(); within != "" && mb.name == within && mb.v.IsArray() {
			raw, err := a.within(mb.v)
			if err != nil {
				return nil, 0, err
			}
			walked[i] = raw
			continue
		}
		at := slices.Index(lists, mb.name)
		if at < 0 || !mb.v.IsArray() {
			continue
		}
		before := a.withheld
		raw, kept, err := a.walk(mb.v, nil, nil)
		if err != nil {
			return nil, 0, err
		}
		walked[i] = raw
		if at == 0 {
			counted = kept
		} else {
			a.withheld = before // counted in the first list
		}
	}
	return walked, counted, nil
}

// list is the origin step of an answer that is itself a list of records
// (catalogue.Records.IsList): follow_tunnels' connections, each marked
// with its drawer's origin and, as origin.TunnelKey, its tunnel's;
// list_tunnels' tunnels, each with its own. Every record stays, a tunnel
// the device may see; for a device that withholds what it does not
// trust, the text an untrusted writer chose is cut from it (a
// connection's drawer_preview, its drawer's; a label, its tunnel's), and
// it says how many in "untrusted_withheld". An error answer (an object)
// passes as it is.
func (a *annotator) list(m gjson.Result) ([]byte, error) {
	if !m.IsArray() {
		if m.Get("error").Exists() {
			return []byte(m.Raw), nil
		}
		return nil, errUnknownShape
	}
	marking := *a
	marking.withhold = false // the record stays; only its untrusted texts are withheld
	out, _, err := marking.walk(m, nil, func(r record, raw []byte) ([]byte, bool) {
		n := map[string]int{}
		gjson.ParseBytes(raw).ForEach(func(k, _ gjson.Result) bool { n[k.Str]++; return true })
		if n["drawer_preview"] > 1 || n["label"] > 1 || n["tunnel_id"] > 1 || n[origin.TunnelKey] > 0 {
			return nil, false // a client's parser may read the copy not cut, or not looked up
		}
		own := a.originOf(r)
		tunnel := own // list_tunnels: the record is the tunnel
		var err error
		if a.rec == catalogue.RecordConnections {
			id := gjson.GetBytes(raw, "tunnel_id").Str
			tunnel = a.originAt(provenance.Tunnel(id), id != "")
			if raw, err = sjson.SetRawBytes(raw, origin.TunnelKey, tunnel.AppendJSON(nil)); err != nil {
				return nil, false
			}
		}
		cut := 0
		for member, o := range map[string]origin.Origin{"drawer_preview": own, "label": tunnel} {
			if !a.withhold || o.Trusted || gjson.GetBytes(raw, member).String() == "" {
				continue
			}
			if raw, err = sjson.DeleteBytes(raw, member); err != nil {
				return nil, false
			}
			cut++
		}
		if cut > 0 {
			raw, err = sjson.SetRawBytes(raw, "untrusted_withheld", strconv.AppendInt(nil, int64(cut), 10))
		}
		return raw, err == nil
	})
	return out, err
}

// within is the origin step of a list of objects each of which holds
// lists of records (catalogue.Records.Within: a checkpoint's
// duplicates[], each with matches[]): each object rebuilt member by
// member, every list of records walked, whatever else as it came. What
// is withheld counts in the answer's untrusted_withheld.
func (a *annotator) within(list gjson.Result) ([]byte, error) {
	out := make([]byte, 1, len(list.Raw)+len(list.Raw)/4+64)
	out[0] = '['
	var err error
	list.ForEach(func(_, it gjson.Result) bool {
		if !it.IsObject() {
			err = errUnknownShape
			return false
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '{')
		for i, mb := range membersOf(it) {
			raw := []byte(mb.v.Raw)
			if slices.Contains(a.rec.Lists(), mb.name) {
				if !mb.v.IsArray() {
					err = errUnknownShape
					return false
				}
				if raw, _, err = a.walk(mb.v, nil, nil); err != nil {
					return false
				}
			}
			if i > 0 {
				out = append(out, ", "...)
			}
			out = append(appendQuoted(out, []byte(mb.name)), ": "...)
			out = append(out, raw...)
		}
		out = append(out, '}')
		return true
	})
	return append(out, ']'), err
}

// closeAnswer ends a rebuilt answer object, saying how many records were
// withheld when some were.
func (a *annotator) closeAnswer(out []byte) []byte {
	if a != nil && a.withheld > 0 {
		out = append(append(out, `, "untrusted_withheld": `...), strconv.Itoa(a.withheld)...)
	}
	return append(out, '}')
}

// withheldOne is the answer for one record (get_drawer's) the device
// withholds: an error naming its writer.
func (a *annotator) withheldOne(m gjson.Result) []byte {
	o := a.originOf(a.read(m))
	who := o.Device
	if o.Label != "" {
		who += " (" + o.Label + ")"
	}
	msg := "withheld: written by " + who + ", a device this device does not trust (its untrusted setting is withhold)"
	if a.d.trusts(o.Device) { // the join that attributed it, or the move that placed it, is not
		msg = "withheld: attributed to " + who + " by a join of, or moved by, " + o.Via + ", a device this device does not trust (its untrusted setting is withhold)"
	}
	if !o.Known() {
		msg = "withheld: of unknown origin, which this device does not trust (its untrusted setting is withhold)"
	}
	out := appendQuoted([]byte(`{"error": `), []byte(msg))
	out = append(out, `, "untrusted_withheld": 1, "origin": `...)
	return append(o.AppendJSON(out), '}')
}
