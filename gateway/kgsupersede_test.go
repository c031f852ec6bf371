package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/gateway/ledger"
)

// Two devices supersede one fact (alice -> bob on one, alice -> carol on
// the other, each offline or one after the other): the second reaches a
// primary where alice is closed and bob current, and MemPalace closes
// nothing and opens carol beside bob. The gateway does not send it: it
// answers success (the op is done) with held_by, valid_from_kept,
// already_closed and a note saying bob was current, whose, that nothing
// was filed and carol not made current, so every reader sees one current
// value (attack105 F2: before, bob and carol were both current and no one
// was told). The same value twice, a supersede after an invalidate, and a
// landed supersede sent again by its op id file (or answer) as before.
func TestTheSecondSupersedeOfAFactIsHeldNotFiledBesideTheFirst(t *testing.T) {
	secondSupersedes(t, startFake(t))
}

// TestRealTheSecondSupersedeOfAFactIsHeldNotFiledBesideTheFirst: the same
// against real MemPalace 3.11.0 serve, which opens a supersede's new
// value beside the current one when its old fact is closed.
func TestRealTheSecondSupersedeOfAFactIsHeldNotFiledBesideTheFirst(t *testing.T) {
	u, srv := startReal(t)
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "svc_z", "predicate": "owner", "object": "alice"})
	srv.MustCall(t, "mempalace_kg_supersede", map[string]any{"subject": "svc_z", "predicate": "owner", "old_object": "alice", "new_object": "bob"})
	srv.MustCall(t, "mempalace_kg_supersede", map[string]any{"subject": "svc_z", "predicate": "owner", "old_object": "alice", "new_object": "carol"})
	if got := srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": "svc_z", "direction": "outgoing"}); strings.Count(fmt.Sprint(got["facts"]), "current:true") != 2 {
		t.Fatalf("MemPalace 3.11.0 sent both supersedes leaves %v; the gateway's hold assumes two current values", got["facts"])
	}
	secondSupersedes(t, u)
}

func secondSupersedes(t *testing.T, u *upstream) {
	g := newGWAt(t, []Device{
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
		{ID: "laptop", Label: "laptop", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
	}, u)
	g.withLedger()
	owner := func(subject, old, nw, at string) map[string]any {
		return map[string]any{"subject": subject, "predicate": "owner", "old_object": old, "new_object": nw, "at": at}
	}
	g.mustKG("laptop", "kg_add", map[string]any{"subject": "svc_a", "predicate": "owner", "object": "alice", "valid_from": "2026-01-01"})
	if res, rpc, _ := g.call(g.tokens["laptop"], "kg_supersede", owner("svc_a", "alice", "bob", "2026-06-01")); rpc != nil || res["success"] != true || res["note"] != nil {
		t.Fatalf("the first supersede: %v %v", res, rpc)
	}
	res, rpc, _ := g.call(g.tokens["ops-0001"], "kg_supersede", owner("svc_a", "alice", "carol", "2026-07-01"))
	note := str(res["note"])
	if rpc != nil || res["success"] != true || res["held_by"] != "laptop" || res["valid_from_kept"] != "2026-06-01T00:00:00Z" || res["already_closed"] != "2026-06-01T00:00:00Z" {
		t.Errorf("the second supersede: %v %v; want success, held_by laptop, valid_from_kept and already_closed 2026-06-01T00:00:00Z", res, rpc)
	}
	for _, want := range []string{`"bob" current, device laptop's (label laptop), from 2026-06-01T00:00:00Z`, "nothing was filed", `"carol" was not made current`, `supersede "bob" with it`, "kg_add it if both are meant to be current", "admin device"} {
		if !strings.Contains(note, want) {
			t.Errorf("the second supersede's note lacks %q: %s", want, note)
		}
	}
	if cur := currentObjects(t, g, "laptop", "svc_a"); len(cur) != 1 || cur["owner"] != "bob" {
		t.Errorf("svc_a's current facts after two supersedes: %v, want owner bob alone", cur)
	}
	if got := countFacts(t, g, "svc_a", "carol"); got != 0 {
		t.Errorf("the primary holds %d carol facts, want none", got)
	}

	// The same value twice: sent, MemPalace keeps bob open; no note.
	if res, rpc, _ := g.call(g.tokens["ops-0001"], "kg_supersede", owner("svc_a", "alice", "bob", "2026-08-01")); rpc != nil || res["success"] != true || res["note"] != nil || res["held_by"] != nil {
		t.Errorf("a supersede to the value current already: %v %v; want a plain success", res, rpc)
	}
	if cur := currentObjects(t, g, "laptop", "svc_a"); len(cur) != 1 || cur["owner"] != "bob" {
		t.Errorf("svc_a's current facts: %v, want owner bob alone", cur)
	}

	// After an invalidate no value is current: the supersede files.
	g.mustKG("laptop", "kg_add", map[string]any{"subject": "svc_b", "predicate": "owner", "object": "alice", "valid_from": "2026-01-01"})
	g.mustKG("laptop", "kg_invalidate", map[string]any{"subject": "svc_b", "predicate": "owner", "object": "alice", "ended": "2026-06-01"})
	if res, rpc, _ := g.call(g.tokens["ops-0001"], "kg_supersede", owner("svc_b", "alice", "dave", "2026-07-01")); rpc != nil || res["success"] != true || res["note"] != nil {
		t.Errorf("a supersede after an invalidate: %v %v; want a plain success", res, rpc)
	}
	if cur := currentObjects(t, g, "laptop", "svc_b"); cur["owner"] != "dave" {
		t.Errorf("svc_b's current facts: %v, want owner dave", cur)
	}

	// A late supersede of a fact superseded twice since (alice -> bob ->
	// dave) is held too, naming the value its replacements lead to
	// (attack109 F3: carol was filed beside dave).
	g.mustKG("laptop", "kg_add", map[string]any{"subject": "svc_d", "predicate": "owner", "object": "alice", "valid_from": "2026-01-01"})
	g.mustKG("laptop", "kg_supersede", owner("svc_d", "alice", "bob", "2026-06-01"))
	g.mustKG("laptop", "kg_supersede", owner("svc_d", "bob", "dave", "2026-07-01"))
	if res, rpc, _ := g.call(g.tokens["ops-0001"], "kg_supersede", owner("svc_d", "alice", "carol", "2026-06-15")); rpc != nil || res["held_by"] != "laptop" || !strings.Contains(str(res["note"]), `"dave" current`) {
		t.Errorf("a late supersede of a fact superseded twice since: %v %v; want it held, naming dave", res, rpc)
	}
	if cur := currentObjects(t, g, "laptop", "svc_d"); len(cur) != 1 || cur["owner"] != "dave" {
		t.Errorf("svc_d's current facts: %v, want owner dave alone", cur)
	}

	// A value current beside the old one all along (a predicate of
	// several values) did not replace it: a supersede of the old one,
	// ended by an invalidate, files (review33 R1).
	lib := func(obj, from string) map[string]any {
		return map[string]any{"subject": "svc_m", "predicate": "uses_lib", "object": obj, "valid_from": from}
	}
	g.mustKG("laptop", "kg_add", lib("x", "2026-01-01"))
	g.mustKG("laptop", "kg_add", lib("y", "2026-01-01"))
	g.mustKG("laptop", "kg_invalidate", map[string]any{"subject": "svc_m", "predicate": "uses_lib", "object": "y", "ended": "2026-03-01"})
	if res, rpc, _ := g.call(g.tokens["laptop"], "kg_supersede", map[string]any{"subject": "svc_m", "predicate": "uses_lib", "old_object": "y", "new_object": "z", "at": "2026-07-01"}); rpc != nil || res["success"] != true || res["held_by"] != nil {
		t.Errorf("a supersede of a value ended beside another current all along: %v %v; want it filed", res, rpc)
	}
	if got := countFacts(t, g, "svc_m", "z"); got != 1 {
		t.Errorf("the primary holds %d z facts, want 1", got)
	}

	// A landed supersede sent again by its op id is answered as before;
	// a held one sent again is held again.
	g.mustKG("laptop", "kg_add", map[string]any{"subject": "svc_c", "predicate": "owner", "object": "alice", "valid_from": "2026-01-01"})
	landed, held := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, send := range []struct{ op, tok, to string }{{landed, "laptop", "bob"}, {held, "ops-0001", "carol"}} {
		first := postedText(t, g, send.tok, owner("svc_c", "alice", send.to, "2026-06-01"), send.op)
		again := postedText(t, g, send.tok, owner("svc_c", "alice", send.to, "2026-06-01"), send.op)
		if gjson.Get(first, "held_by").Exists() != (send.op == held) || gjson.Get(first, "note").Str != gjson.Get(again, "note").Str || gjson.Get(again, "success").Bool() != true {
			t.Errorf("op %s to %s sent twice: %s then %s", send.op[:1], send.to, first, again)
		}
	}
	if cur := currentObjects(t, g, "laptop", "svc_c"); len(cur) != 1 || cur["owner"] != "bob" {
		t.Errorf("svc_c's current facts: %v, want owner bob alone", cur)
	}
}

// postedText is the text result of a kg_supersede sent with op id opID
// as the device of token name tok.
func postedText(t *testing.T, g *gw, tok string, args map[string]any, opID string) string {
	t.Helper()
	status, m := g.postOp(g.tokens[tok], "mempalace_kg_supersede", args, opID)
	b, _ := json.Marshal(m)
	if status != 200 || m["error"] != nil {
		t.Fatalf("kg_supersede op %s: %d %s", opID, status, b)
	}
	return gjson.GetBytes(b, "result.content.0.text").Str
}

// countFacts is how many facts, open or closed, of subject name object,
// as the primary's own kg_query lists them.
func countFacts(t *testing.T, g *gw, subject, object string) int {
	t.Helper()
	res, rpc, _ := g.call(g.tokens["ops-0001"], "kg_query", map[string]any{"entity": subject, "direction": "outgoing"})
	if rpc != nil {
		t.Fatalf("kg_query %s: %v", subject, rpc)
	}
	n := 0
	for _, x := range res["facts"].([]any) {
		if str(x.(map[string]any)["object"]) == object {
			n++
		}
	}
	return n
}

// A device files a value while another supersedes it, each offline (the
// laptop: erin, then erin -> frank; the desk: erin, then erin -> gina):
// the desk's add reaches a primary where erin is closed and frank, which
// replaced it, current. MemPalace would file erin again beside frank, and
// the desk's supersede of erin would then go through: frank and gina both
// current, no one told (attack112 F1). The add is held as a second
// supersede is (held_by, the fix in its note), so the supersede after it
// is held too and frank alone is current. An add that starts after the
// replacement (a value meant to be current beside it), one of a value
// ended with nothing replacing it, and a closed one file as before.
func TestAnAddOfAValueAnotherDeviceReplacedIsHeld(t *testing.T) {
	replacedAdds(t, startFake(t))
}

// TestRealAnAddOfAValueAnotherDeviceReplacedIsHeld: the same against real
// MemPalace 3.11.0 serve, which files an add of a closed fact's triple
// as a new current fact.
func TestRealAnAddOfAValueAnotherDeviceReplacedIsHeld(t *testing.T) {
	u, srv := startReal(t)
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "svc_z", "predicate": "lead", "object": "erin"})
	srv.MustCall(t, "mempalace_kg_supersede", map[string]any{"subject": "svc_z", "predicate": "lead", "old_object": "erin", "new_object": "frank"})
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "svc_z", "predicate": "lead", "object": "erin"})
	if got := srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": "svc_z", "direction": "outgoing"}); strings.Count(fmt.Sprint(got["facts"]), "current:true") != 2 {
		t.Fatalf("MemPalace 3.11.0 sent the add leaves %v; the gateway's hold assumes two current values", got["facts"])
	}
	replacedAdds(t, u)
}

func replacedAdds(t *testing.T, u *upstream) {
	g := newGWAt(t, []Device{
		{ID: "laptop", Label: "laptop", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
		{ID: "desk", Label: "desk", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
	}, u)
	g.withLedger()
	lead := func(subject, obj string, more ...string) map[string]any {
		m := map[string]any{"subject": subject, "predicate": "lead", "object": obj}
		for i := 0; i < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}
	g.mustKG("laptop", "kg_add", lead("svc_e", "erin", "valid_from", "2026-01-01"))
	g.mustKG("laptop", "kg_supersede", map[string]any{"subject": "svc_e", "predicate": "lead", "old_object": "erin", "new_object": "frank", "at": "2026-06-01"})
	res, rpc, _ := g.call(g.tokens["desk"], "kg_add", lead("svc_e", "erin"))
	note := str(res["note"])
	if rpc != nil || res["success"] != true || res["held_by"] != "laptop" || res["already_closed"] != "2026-06-01T00:00:00Z" {
		t.Errorf("the desk's add of erin, replaced by frank: %v %v; want success, held_by laptop, already_closed 2026-06-01T00:00:00Z", res, rpc)
	}
	for _, want := range []string{`"frank" current, device laptop's`, "before this add arrived", "nothing was filed", `supersede "frank" with it`, "kg_add it with a valid_from after 2026-06-01T00:00:00Z"} {
		if !strings.Contains(note, want) {
			t.Errorf("the held add's note lacks %q: %s", want, note)
		}
	}
	if res, rpc, _ := g.call(g.tokens["desk"], "kg_supersede", map[string]any{"subject": "svc_e", "predicate": "lead", "old_object": "erin", "new_object": "gina", "at": "2026-06-02"}); rpc != nil || res["held_by"] != "laptop" {
		t.Errorf("the desk's supersede of erin after its add: %v %v; want it held", res, rpc)
	}
	if cur := currentOf(t, g, "laptop", "svc_e"); !slices.Equal(cur, []string{"frank"}) {
		t.Errorf("svc_e's current leads: %v, want frank alone", cur)
	}
	// Dated on or before the replacement's start: held; after it: filed.
	for _, from := range []string{"2026-05-01", "2026-06-01T00:00:00Z", "2026-06-01"} {
		if res, _, _ := g.call(g.tokens["desk"], "kg_add", lead("svc_e", "erin", "valid_from", from)); res["held_by"] != "laptop" {
			t.Errorf("an add of erin from %s: %v, want it held", from, res)
		}
	}
	if res, rpc, _ := g.call(g.tokens["desk"], "kg_add", lead("svc_e", "erin", "valid_from", "2026-06-01T00:00:01Z")); rpc != nil || res["held_by"] != nil || res["success"] != true {
		t.Errorf("an add of erin starting after frank: %v %v; want it filed", res, rpc)
	}
	if cur := currentOf(t, g, "laptop", "svc_e"); !slices.Equal(cur, []string{"erin", "frank"}) {
		t.Errorf("svc_e's current leads after a later add: %v, want erin and frank", cur)
	}
	// Ended with nothing replacing it, or added closed: filed.
	g.mustKG("laptop", "kg_add", lead("svc_f", "erin", "valid_from", "2026-01-01"))
	g.mustKG("laptop", "kg_invalidate", map[string]any{"subject": "svc_f", "predicate": "lead", "object": "erin", "ended": "2026-06-01"})
	if res, rpc, _ := g.call(g.tokens["desk"], "kg_add", lead("svc_f", "erin")); rpc != nil || res["held_by"] != nil {
		t.Errorf("an add of a value ended with nothing replacing it: %v %v; want it filed", res, rpc)
	}
	if cur := currentOf(t, g, "laptop", "svc_f"); !slices.Equal(cur, []string{"erin"}) {
		t.Errorf("svc_f's current leads: %v, want erin", cur)
	}
	g.mustKG("laptop", "kg_add", lead("svc_g", "erin", "valid_from", "2026-01-01"))
	g.mustKG("laptop", "kg_supersede", map[string]any{"subject": "svc_g", "predicate": "lead", "old_object": "erin", "new_object": "frank", "at": "2026-06-01"})
	if res, rpc, _ := g.call(g.tokens["desk"], "kg_add", lead("svc_g", "erin", "valid_from", "2025-01-01", "valid_to", "2025-06-01")); rpc != nil || res["held_by"] != nil {
		t.Errorf("a closed add of a replaced value: %v %v; want it filed", res, rpc)
	}
	if cur := currentOf(t, g, "laptop", "svc_g"); !slices.Equal(cur, []string{"frank"}) {
		t.Errorf("svc_g's current leads: %v, want frank", cur)
	}
}

// currentOf is subject's current lead objects, sorted, as the primary's
// own kg_query lists them to device reader.
func currentOf(t *testing.T, g *gw, reader, subject string) []string {
	t.Helper()
	res, rpc, _ := g.call(g.tokens[reader], "kg_query", map[string]any{"entity": subject, "direction": "outgoing"})
	if rpc != nil {
		t.Fatalf("kg_query %s: %v", subject, rpc)
	}
	var out []string
	for _, x := range res["facts"].([]any) {
		if f := x.(map[string]any); f["valid_to"] == nil && f["predicate"] == "lead" {
			out = append(out, str(f["object"]))
		}
	}
	slices.Sort(out)
	return out
}

// An add whose first send filed it, its answer lost, and that another
// device replaced before the resend, is held on the resend (no second
// erin beside frank), and its note does not say nothing was filed: the
// first send may have (review34 R4).
func TestAResentAddOfAValueReplacedSinceSaysItsFirstSendMayHaveFiledIt(t *testing.T) {
	t.Parallel()
	g := newCuttingGateway(t, startFake(t).url)
	lead := map[string]any{"subject": "svc_r", "predicate": "lead", "object": "erin"}
	g.proxy.Drop("mempalace_kg_add")
	if status, m := g.postOp(g.tokens["mal"], "mempalace_kg_add", lead, opOf('c')); status != http.StatusBadGateway {
		t.Fatalf("a kg_add, its answer lost: %d %v", status, m)
	}
	g.mustKG("ops", "kg_supersede", map[string]any{"subject": "svc_r", "predicate": "lead", "old_object": "erin", "new_object": "frank", "at": "2026-06-01"})
	status, m := g.postResend(g.tokens["mal"], "mempalace_kg_add", lead, opOf('c'))
	res := result(m)
	if note := str(res["note"]); status != 200 || res["held_by"] == nil || !strings.Contains(note, "its op's first send, whose answer was lost, may have filed it") || strings.Contains(note, "nothing was filed, so") {
		t.Errorf("the resend: %d %v; want it held, its note saying the first send may have filed it", status, res)
	}
	if cur := currentOf(t, g.gw, "ops", "svc_r"); !slices.Equal(cur, []string{"frank"}) {
		t.Errorf("svc_r's current leads: %v, want frank alone", cur)
	}
}

// An add made offline before the replacement of its value landed is held
// whatever its valid_from (attack113 F1: an offline device's add dated
// now, after the other device's supersede, was filed beside it); made
// after it landed, and starting after it, it files. An add ending ahead
// of now is current till then, so it is held too (attack113 F2).
func TestAnAddMadeBeforeTheReplacementLandedIsHeldWhateverItsDates(t *testing.T) {
	t.Parallel()
	g := newGWAt(t, []Device{
		{ID: "laptop", Label: "laptop", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
		{ID: "desk", Label: "desk", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
	}, startFake(t))
	g.withLedger()
	g.mustKG("laptop", "kg_add", map[string]any{"subject": "svc_o", "predicate": "lead", "object": "erin", "valid_from": "2026-01-01"})
	g.mustKG("laptop", "kg_supersede", map[string]any{"subject": "svc_o", "predicate": "lead", "old_object": "erin", "new_object": "frank", "at": "2026-06-01"})
	addMade := func(made time.Time, args map[string]any, op byte) map[string]any {
		t.Helper()
		args = maps.Clone(args)
		args["subject"], args["predicate"], args["object"] = "svc_o", "lead", "erin"
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
			"name": "mempalace_kg_add", "arguments": args, "_meta": map[string]any{ledger.MetaKey: opOf(op), ledger.MadeAtKey: made.Format(time.RFC3339)}}})
		status, m := g.post(g.tokens["desk"], string(b))
		if status != 200 {
			t.Fatalf("kg_add: %d %v", status, m)
		}
		return result(m)
	}
	later := map[string]any{"valid_from": "2026-11-30T11:00:00Z"} // after frank's start
	if res := addMade(g.clock().Add(-time.Hour), later, 'a'); res["held_by"] != "laptop" {
		t.Errorf("an add made an hour before frank landed, dated after frank: %v, want it held", res)
	}
	if res := addMade(g.clock().Add(-time.Hour), map[string]any{"valid_to": "2027-06-01"}, 'b'); res["held_by"] != "laptop" {
		t.Errorf("an add ending ahead of now: %v, want it held", res)
	}
	if cur := currentOf(t, g, "laptop", "svc_o"); !slices.Equal(cur, []string{"frank"}) {
		t.Errorf("svc_o's current leads: %v, want frank alone", cur)
	}
	if res := addMade(g.clock().Add(time.Minute), later, 'c'); res["held_by"] != nil || res["success"] != true {
		t.Errorf("an add made after frank landed, dated after frank: %v, want it filed", res)
	}
	if cur := currentOf(t, g, "laptop", "svc_o"); !slices.Equal(cur, []string{"erin", "frank"}) {
		t.Errorf("svc_o's current leads: %v, want erin and frank", cur)
	}
}

// A device's own sequence is replicated as its palace made it: a value it
// replaced itself and then added again (queued offline: made before its
// supersede landed), or one whose replacement is of unknown origin (the
// supersede's answer lost), files beside the replacement, as the local
// palace filed it; a later supersede or end of it then lands (CI 130's
// chaos test: the re-add held, the supersede after it held, the end of
// that dead).
func TestAnAddOfAValueThisDeviceReplacedFiles(t *testing.T) {
	t.Parallel()
	g := newCuttingGateway(t, startFake(t).url)
	ops := g.tokens["ops"]
	g.mustKG("ops", "kg_add", map[string]any{"subject": "svc_s", "predicate": "lead", "object": "erin", "valid_from": "2026-01-01"})
	g.mustKG("ops", "kg_supersede", map[string]any{"subject": "svc_s", "predicate": "lead", "old_object": "erin", "new_object": "frank", "at": "2026-06-01"})
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": "mempalace_kg_add", "arguments": map[string]any{"subject": "svc_s", "predicate": "lead", "object": "erin"},
		"_meta": map[string]any{ledger.MetaKey: opOf('d'), ledger.MadeAtKey: g.clock().Add(-time.Hour).Format(time.RFC3339)}}})
	if status, m := g.post(ops, string(b)); status != 200 || result(m)["held_by"] != nil {
		t.Errorf("ops's add of a value it replaced itself: %d %v, want it filed", status, m)
	}
	if cur := currentOf(t, g.gw, "ops", "svc_s"); !slices.Equal(cur, []string{"erin", "frank"}) {
		t.Errorf("svc_s's current leads: %v, want erin and frank, as ops's palace holds them", cur)
	}

	g.mustKG("mal", "kg_add", map[string]any{"subject": "svc_u", "predicate": "lead", "object": "erin", "valid_from": "2026-01-01"})
	g.proxy.Drop("mempalace_kg_supersede")
	g.call(g.tokens["mal"], "kg_supersede", map[string]any{"subject": "svc_u", "predicate": "lead", "old_object": "erin", "new_object": "frank", "at": "2026-06-01"})
	if res, rpc, _ := g.call(g.tokens["mal"], "kg_add", map[string]any{"subject": "svc_u", "predicate": "lead", "object": "erin"}); rpc != nil || res["held_by"] != nil {
		t.Errorf("an add of a value replaced by a supersede of unknown origin: %v %v, want it filed", res, rpc)
	}
	if cur := currentOf(t, g.gw, "ops", "svc_u"); !slices.Equal(cur, []string{"erin", "frank"}) {
		t.Errorf("svc_u's current leads: %v, want erin and frank", cur)
	}
}
