package gateway

import (
	"encoding/json"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// kgTypesKey is the member of a kg_stats answer listing its predicates:
// the facts' writers' own text (MemPalace lower-cases it and joins its
// words with "_"), the one writer text a kg_stats answer carries.
const kgTypesKey = "relationship_types"

// untrustedTypesKey lists, in a kg_stats answer for a device that marks
// what it does not trust, the predicates of relationship_types that no
// writer it trusts gave a fact.
const untrustedTypesKey = "untrusted_relationship_types"

// kgStatsOrigins is the origin step of a kg_stats answer for d, a device
// that names a trusted set (attack70 F1): a predicate is trusted when a
// device d trusts (and the via of that stamp) wrote a fact with it
// through the gateway (provenance.Store.PredicateWrittenBy); one that
// only untrusted writers' facts, or facts of unknown origin, have is left
// out for a device that withholds (counted in "untrusted_withheld") and
// listed in "untrusted_relationship_types" for one that marks. The
// counts are numbers, not text, and stay. The cost is a map look-up per
// predicate: no read of the primary.
func (s *Server) kgStatsOrigins(d *Device, id json.RawMessage, resp []byte) ([]byte, error) {
	m, kind, err := answerText(resp)
	switch {
	case err != nil:
		return nil, err
	case kind == answerRPCError:
		return resp, nil
	case kind == answerToolError, !m.IsObject():
		return nil, errUnknownShape
	}
	seen := map[string]int{}
	for _, mb := range membersOf(m) {
		seen[mb.name]++
	}
	types := m.Get(kgTypesKey)
	switch {
	case seen[kgTypesKey] == 0:
		return resp, nil // an error answer: no writer text
	case seen[kgTypesKey] > 1 || seen["untrusted_withheld"] > 0 || seen[untrustedTypesKey] > 0 || !types.IsArray():
		return nil, errUnknownShape
	}
	trusted := func(device, via string) bool { return d.trustsOrigin(origin.Origin{Device: device, Via: via}) }
	kept, untrusted, bad := []string{}, []string{}, false
	types.ForEach(func(_, p gjson.Result) bool {
		switch {
		case p.Type != gjson.String:
			bad = true
		case s.prov.PredicateWrittenBy(catalogue.PredicateID(p.Str), trusted):
			kept = append(kept, p.Str)
		default:
			untrusted = append(untrusted, p.Str)
		}
		return !bad
	})
	if bad {
		return nil, errUnknownShape
	}
	if len(untrusted) == 0 {
		return resp, nil
	}
	text := []byte(m.Raw)
	if d.Untrusted == UntrustedWithhold {
		text, err = sjson.SetBytes(text, kgTypesKey, kept)
		if err == nil {
			text, err = sjson.SetRawBytes(text, "untrusted_withheld", strconv.AppendInt(nil, int64(len(untrusted)), 10))
		}
	} else {
		text, err = sjson.SetBytes(text, untrustedTypesKey, untrusted)
	}
	if err != nil {
		return nil, errUnknownShape // not reached: m is an object gjson read
	}
	return rewrap(id, text), nil
}
