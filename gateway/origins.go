package gateway

import (
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// annotator is the origin step of one answer for one reading device:
// each record gains an "origin" (gateway/origin), looked up in the
// provenance index by what the record holds, says whether the device
// trusts its writer, and is left out when the device withholds what it
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
	return &annotator{d: d, prov: s.prov, rec: t.Records, withhold: d.Untrusted == UntrustedWithhold}
}

// key is the index key of one record (ok false: the record says too
// little to be found, as a 3.6.0 search hit without drawer_id).
func (a *annotator) key(it gjson.Result) (provenance.Key, bool) {
	get := func(k string) string { return it.Get(k).Str }
	switch a.rec {
	case catalogue.RecordMatches, catalogue.RecordEvents, catalogue.RecordArtifact:
		id := get("id")
		if a.rec == catalogue.RecordMatches {
			return provenance.Drawer(id), id != ""
		}
		return provenance.Event(id), id != ""
	case catalogue.RecordDiary:
		return provenance.Diary(a.agent, get("timestamp"), get("content")), a.agent != ""
	case catalogue.RecordFacts, catalogue.RecordTimeline:
		return provenance.Fact(get("subject"), get("predicate"), get("object"), get("valid_from")), get("subject") != ""
	}
	id := get("drawer_id")
	return provenance.Drawer(id), id != ""
}

// originOf is who wrote one record, as the reading device gets it.
func (a *annotator) originOf(it gjson.Result) origin.Origin {
	o := origin.Origin{Device: origin.Unknown}
	if k, ok := a.key(it); ok {
		if st, known := a.prov.Lookup(k); known {
			o = origin.Origin{Device: st.Device, Label: st.Label, Agent: st.Agent, Via: st.Via, At: st.At.UTC().Format(time.RFC3339Nano)}
		}
	}
	o.Trusted = a.d.trusts(o.Device)
	return o
}

// item is one record with its origin added (keep false: withheld). A
// record that already has an "origin" is an answer shape the gateway does
// not know; an item that is an error (get_drawers' missing ids) is passed
// as it is.
func (a *annotator) item(it gjson.Result) (raw string, keep bool, err error) {
	if it.Get(origin.Key).Exists() {
		return "", false, errUnknownShape
	}
	if it.Get("error").Exists() {
		return it.Raw, true, nil
	}
	o := a.originOf(it)
	if !o.Trusted && a.withhold {
		return "", false, nil
	}
	return withMember(it.Raw, origin.Key, o.AppendJSON(nil)), true, nil
}

// withMember adds "key": value as the last member of the JSON object obj.
func withMember(obj, key string, value []byte) string {
	end := strings.LastIndexByte(obj, '}')
	body := strings.TrimRight(obj[:end], " \t\r\n")
	var b strings.Builder
	b.Grow(len(obj) + len(key) + len(value) + 8)
	b.WriteString(body)
	if body != "{" {
		b.WriteString(", ")
	}
	b.Write(appendQuoted(nil, []byte(key)))
	b.WriteString(": ")
	b.Write(value)
	b.WriteString(obj[len(body):])
	return b.String()
}

// walk rebuilds a list of records, each through keep (the visibility cut;
// nil: every one) and the annotator; kept is how many are in it.
func (a *annotator) walk(list gjson.Result, keep func(gjson.Result) (bool, bool), each func(raw string) (string, bool)) (out []byte, kept int, err error) {
	out = []byte{'['}
	list.ForEach(func(_, it gjson.Result) bool {
		if !it.IsObject() {
			err = errUnknownShape
			return false
		}
		if keep != nil {
			visible, ok := keep(it)
			if !ok {
				err = errUnknownShape
				return false
			}
			if !visible {
				return true
			}
		}
		raw := it.Raw
		if a != nil {
			var ok bool
			if raw, ok, err = a.item(it); err != nil {
				return false
			} else if !ok {
				a.withheld++
				return true
			}
		}
		if each != nil {
			var ok bool
			if raw, ok = each(raw); !ok {
				err = errUnknownShape
				return false
			}
		}
		if kept++; kept > 1 {
			out = append(out, ',')
		}
		out = append(out, raw...)
		return true
	})
	return append(out, ']'), kept, err
}

// answer is the origin step of an answer the filter did not cut: m with
// each record annotated and, if any was withheld, its count recounted
// and "untrusted_withheld" added. An error answer is passed as it is.
func (a *annotator) answer(m gjson.Result) ([]byte, error) {
	if obj := a.rec.Object(); obj != "" {
		rec := m
		if obj != "." {
			rec = m.Get(obj)
		}
		if !rec.IsObject() || (obj == "." && m.Get("error").Exists()) {
			return []byte(m.Raw), nil // an error answer: no record
		}
		raw, keep, err := a.item(rec)
		switch {
		case err != nil:
			return nil, err
		case !keep:
			return a.withheldOne(rec), nil
		case obj == ".":
			return []byte(raw), nil
		}
		out, err := sjson.SetRaw(m.Raw, obj, raw)
		return []byte(out), err
	}
	a.agent = strings.ToLower(strings.TrimSpace(m.Get("agent").Str))
	lists := a.rec.Lists()
	walked := make(map[string][]byte, len(lists))
	counted := 0
	for i, name := range lists {
		v := m.Get(name)
		if !v.IsArray() {
			continue
		}
		before := a.withheld
		raw, kept, err := a.walk(v, nil, nil)
		if err != nil {
			return nil, err
		}
		walked[name] = raw
		if i == 0 {
			counted = kept
		} else {
			a.withheld = before // counted in the first list
		}
	}
	out := []byte{'{'}
	m.ForEach(func(k, v gjson.Result) bool {
		name := k.String()
		raw, ok := walked[name]
		switch {
		case ok:
		case (name == "count" || name == "showing") && a.withheld > 0:
			raw = strconv.AppendInt(nil, int64(counted), 10)
		default:
			raw = []byte(v.Raw)
		}
		if len(out) > 1 {
			out = append(out, ", "...)
		}
		out = append(appendQuoted(out, []byte(name)), ": "...)
		out = append(out, raw...)
		return true
	})
	return a.closeAnswer(out), nil
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
	o := a.originOf(m)
	who := o.Device
	if o.Label != "" {
		who += " (" + o.Label + ")"
	}
	msg := "withheld: written by " + who + ", a device this device does not trust (its untrusted setting is withhold)"
	if !o.Known() {
		msg = "withheld: of unknown origin, which this device does not trust (its untrusted setting is withhold)"
	}
	out := appendQuoted([]byte(`{"error": `), []byte(msg))
	out = append(out, `, "untrusted_withheld": 1, "origin": `...)
	return append(o.AppendJSON(out), '}')
}
