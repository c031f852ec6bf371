package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/strictjson"
)

// encodeJSON writes v as compact JSON without HTML escaping (the upstream
// gets the characters that were sent).
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("gateway: encoding a parsed value: %v", err)) // cannot happen: v holds only what JSON decodes to (strictjson.Decode's values, and maps of them)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// rpcRequest is one JSON-RPC message as the gateway parsed it. What the
// upstream receives is encode()'s output, built from these fields alone.
type rpcRequest struct {
	msg    map[string]any // the envelope as parsed
	id     any            // nil when absent
	hasID  bool
	Method string
	// Tool and Args: a tools/call's name and arguments (Args never nil).
	Tool string
	Args map[string]any
	// sentDigest is the op-id ledger's digest of Args as parsed, before any
	// step changes them (ledgerDigest); sentLegacy, their unkeyed digest
	// (legacyArgsDigest).
	sentDigest, sentLegacy string
	// queuedAs, recordOf: the ledger's Forwarded.QueuedAs and RecordOf,
	// for the audit line.
	queuedAs, recordOf string
	// slotHeld: the handler holds the write slot for this call (a delete:
	// the trash's look-up and the delete hold it together).
	slotHeld bool
	// unsent: why sendWrite did not send the write once it held the slot
	// (a *denial, or errNoAnswer for a look-up it needed); nil: sent.
	unsent error
	// filed: a checkpoint's items its send was seen to file (absent from
	// the upstream before it, there after it) when its answer did not
	// list them (settled or lost: sendWrite).
	filed []string
	// notFiled: a checkpoint's replayed items replayItemsStep dropped (the
	// trash holds their drawers deleted), as its answer lists them.
	notFiled []any
	// kept: a delete's drawers the keep step kept in the trash (they are
	// looked up when its answer is lost: settledDelete).
	kept *doomed
	// held: the write's record was on the upstream before it, holding
	// the text it sends (update_drawer's content read by the keep step,
	// a kg_add of a fact held current, a kg_supersede held by another
	// current value, not sent: sendWrite), so the write is not
	// its record's to stamp: its stamp, or none, stays.
	held bool
	// heldNote: a kg_add held by another device's fact, or one with other
	// dates, or a kg_supersede held by another current value: what its
	// answer gains (heldNote, supersedeHeld; nil: nothing).
	heldNote map[string]any
	// replaced: held and not sent, a kg_supersede or kg_add that would
	// open a value beside the current one that replaced its own
	// (replacedNote): its answer is a success with heldNote's members.
	replaced bool
	// respelt: held, the update_drawer's text the drawer's words in other
	// whitespace or Unicode form (sameText, not the same bytes): neither
	// writer's alone, so its stamp goes (of unknown origin).
	respelt bool
	// respeltOwn: an update_drawer that respells its device's own drawer
	// (sameText): the drawer's stamp, which stays its writer's and moves
	// to the respelling's time, the text's (attack107 F5: a delete
	// refused as changed since named a time before it was made).
	respeltOwn *provenance.Stamp
	// moved: an update_drawer that moves a drawer not this device's to
	// another room or wing (its place is then the mover's text): the
	// drawer's stamp once the move is made, naming the mover as via (the
	// zero Stamp: none, of unknown origin); withdrawn while it is in flight.
	moved *provenance.Stamp
	// stale: an update_drawer whose base (origin.BaseKey) is not the
	// primary's text (staleBase): sendWrite does not send it (nil: none).
	stale *changed
	// placedBy: an update_drawer that rewrites a drawer and leaves it
	// where another device placed it (its stamp's via: a mover, a join's
	// admin) keeps that device as via ("": none).
	placedBy string
	// diary: an update_drawer's drawer when it is a diary entry (the
	// zero diaryPlace: not one), and diaryText its text before the update
	// (updateEntries stamps the text it holds after it in diary_read).
	diary     diaryPlace
	diaryText string
	// facts: the upstream's facts of a kg_supersede's subject, read after
	// it (sendWrite; nil: not read), which name the fact it opened; of a
	// kg_invalidate's, read before it (endsOthersFact), which show a fact
	// closed already (closedAlready).
	facts []any
}

// badRequest is a parse step's refusal: a JSON-RPC error code and
// message (and, for a body that is not JSON or a notification it does
// not take, HTTP 400; a JSON-RPC error in a 200 otherwise).
type badRequest struct {
	code   int
	msg    string
	sent   string // what the device sent that msg ends with, shown cut (Audit.cut)
	status int    // the HTTP status, when not the code's
}

func (e *badRequest) httpStatus() int {
	switch {
	case e.status != 0:
		return e.status
	case e.code == -32700:
		return 400
	}
	return 200
}

func (e *badRequest) Error() string { return e.msg + e.sent }

// envelopeKeys and callKeys are the only keys a request and a tools/call's
// params may carry.
var (
	envelopeKeys = []string{"jsonrpc", "id", "method", "params"}
	callKeys     = []string{"name", "arguments", "_meta"}
)

// parseRequest is the parse step: the body is parsed once, strictly, and
// everything later (authorization, audit, forwarding) reads the result.
// A refused request comes back too when its id could be read (the
// refusal answers it).
func parseRequest(body []byte) (*rpcRequest, *badRequest) {
	r, bad := parseEnvelope(body)
	if bad == nil && r.Method == "tools/call" {
		bad = r.parseCall()
	}
	if bad == nil && r.Method == "tools/call" && !r.hasID {
		// A notification, which JSON-RPC answers with nothing: made, its
		// client would never learn what came of it (attack92 F3). MCP's
		// HTTP transport answers one the server does not take with an
		// HTTP error, whose body may be a JSON-RPC error with no id.
		bad = &badRequest{code: -32600, msg: "Invalid Request: a tools/call without an id is a notification, which gets no answer; the gateway does not make it: give the call an id", status: http.StatusBadRequest}
	}
	if bad == nil && len(body) > MaxReadBody {
		if t, _ := catalogue.Lookup(r.Tool); r.Method != "tools/call" || t.Reads {
			bad = &badRequest{code: -32600, msg: fmt.Sprintf("Request too large: a read or a protocol message is at most %d bytes (only a write carries more)", MaxReadBody)}
		}
	}
	return r, bad
}

// MaxReadBody caps a request that is not a write (a read tool's call, a
// protocol message), where MaxBody caps a write's: the longest argument a
// read takes is check_duplicate's content, a drawer's text of at most
// 100,000 characters (MemPalace's sanitize_content), 1.2 MB as JSON
// however it escapes them (\ud83d\ude00: 12 bytes a character); every
// other read argument is a name, a query or ids. A read of 16 MiB is
// only ever a cost put on the primary, which parses and embeds it.
const MaxReadBody = 2 << 20

// parseEnvelope parses the JSON-RPC message around a call: one object,
// only envelopeKeys, an id a string, an integer or null (plainID), a
// method the gateway relays (and, but for tools/call, its params an
// object if any).
//
// A body strictjson refuses is refused -32600 (an edge reads a call's
// arguments alone, at strictjson.ArgumentsDepth, so it refuses the same
// argument bytes before they are queued); when only its params are
// (the envelope read alike by every parser), the refusal answers its id.
func parseEnvelope(body []byte) (*rpcRequest, *badRequest) {
	v, err := strictjson.Decode(body)
	var strict *strictjson.Error
	if errors.As(err, &strict) {
		bad := &badRequest{code: -32600, msg: "Invalid Request: " + err.Error()}
		if !strict.Within("$.params") {
			return nil, bad
		}
		if v == nil { // the parse stopped in the params (MaxValues): the envelope is read again without them (attack100 F2)
			if v, err = strictjson.DecodeEnvelope(body); err != nil {
				return nil, bad
			}
		}
		if r, envBad := envelope(v); envBad == nil {
			return r, bad
		}
		return nil, bad
	}
	if err != nil {
		return nil, &badRequest{code: -32700, msg: "Parse error"}
	}
	return envelope(v)
}

// envelope checks the parsed message around a call (parseEnvelope).
func envelope(v any) (*rpcRequest, *badRequest) {
	msg, ok := v.(map[string]any)
	if !ok {
		return nil, &badRequest{code: -32600, msg: "Invalid Request: one JSON-RPC object per request (no batches)"}
	}
	for k := range msg {
		if !slices.Contains(envelopeKeys, k) {
			return nil, &badRequest{code: -32600, msg: "Invalid Request: unknown member ", sent: k}
		}
	}
	r := &rpcRequest{msg: msg}
	r.id, r.hasID = msg["id"]
	if !plainID(r.id) {
		return nil, &badRequest{code: -32600, msg: "Invalid Request: id must be a string, an integer (64-bit, without a fraction or an exponent) or null"}
	}
	if v, ok := msg["jsonrpc"]; ok && v != "2.0" {
		return r, &badRequest{code: -32600, msg: `Invalid Request: jsonrpc must be "2.0"`}
	}
	m, ok := msg["method"].(string)
	if !ok {
		return r, &badRequest{code: -32600, msg: "Invalid Request: method must be a string"}
	}
	r.Method = m
	switch {
	case m == "initialize" || m == "ping" || m == "tools/list" || strings.HasPrefix(m, "notifications/"):
		if p := msg["params"]; p != nil {
			if _, ok := p.(map[string]any); !ok {
				return r, &badRequest{code: -32602, msg: "Invalid params: params must be an object"}
			}
		}
	case m != "tools/call":
		return r, &badRequest{code: -32601, msg: "Unknown method: ", sent: m} // not echoed in full (attack44 F13)
	}
	return r, nil
}

// plainID reports an id every parser reads alike: a string, null, or an
// integer literal within int64 ("-0", a fraction, an exponent or more
// digits a parser may read as a float, or as inf).
func plainID(id any) bool {
	switch v := id.(type) {
	case nil, string:
		return true
	case json.Number:
		_, err := strconv.ParseInt(string(v), 10, 64)
		return err == nil && v != "-0"
	}
	return false
}

// parseCall parses a tools/call's params: only callKeys, a non-empty
// name, arguments an object (absent or null: none).
func (r *rpcRequest) parseCall() *badRequest {
	p, ok := r.msg["params"].(map[string]any)
	if !ok {
		return &badRequest{code: -32602, msg: "Invalid params: 'name' is required for tools/call"}
	}
	for k := range p {
		if !slices.Contains(callKeys, k) {
			return &badRequest{code: -32602, msg: "Invalid params: unknown member ", sent: k}
		}
	}
	name, ok := p["name"].(string)
	if !ok || name == "" {
		return &badRequest{code: -32602, msg: "Invalid params: 'name' must be a non-empty string"}
	}
	r.Tool = name
	if len(name) > maxField { // no tool's name is as long: not echoed in full
		return &badRequest{code: -32602, msg: "Invalid params: no tool is named ", sent: name}
	}
	switch a := p["arguments"].(type) {
	case nil: // absent or null: no arguments
		r.Args = map[string]any{}
	case map[string]any:
		r.Args = a
	default:
		return &badRequest{code: -32602, msg: "Invalid params: 'arguments' must be an object"}
	}
	return nil
}

// stringArgs are the arguments authorization reads as names (wings,
// agents, ids): anything but a string there is refused, so no coercion
// upstream can turn it into a name the gateway did not check.
var stringArgs = []string{"wing", "room", "agent_name", "from_agent", "created_by", "to_agent", "drawer_id", "event_id", "artifact_id", "source_wing", "target_wing", "source_room", "target_room", "added_by"}

// dropNullNames deletes from args every argument of stringArgs that is
// null, but where MemPalace gives null a meaning of its own: it passes a
// null to the tool's function as None, the default of each of these
// arguments where it is optional (a diary's wing defaults to "", which
// it reads alike; added_by the gateway stamps), so "wing": null is a call
// without a wing (a search of every wing), authorized and forwarded as
// one. patch_submit's room defaults to "patches", so its null stays
// (and is refused: must be a string). Where the argument is required,
// MemPalace refuses the call for its absence as it refused None.
func dropNullNames(t catalogue.Tool, args map[string]any) {
	for _, k := range stringArgs {
		if v, ok := args[k]; ok && v == nil && (t.Name != "patch_submit" || k != "room") {
			delete(args, k)
		}
	}
}

// nameArgs are the arguments MemPalace passes through sanitize_name (or
// _sanitize_optional_name) before use: wings, rooms, a diary's agent.
// sanitize_name strips surrounding whitespace (Python's str.strip) and
// otherwise takes the name as sent or refuses it, so the gateway refuses
// a padded name: authorizing "wing_instructions " and forwarding it would
// file into wing_instructions. Refusing, rather than stripping here and
// forwarding the stripped name, keeps what the gateway forwards, audits
// and the edge queued the same bytes, and needs no copy of the rest of
// MemPalace's rules: any name it would change is refused.
var nameArgs = []string{"wing", "room", "agent_name", "source_wing", "source_room", "target_wing", "target_room", "wing_a", "wing_b", "start_room"}

// checkArgs is the argument allow-list: every argument must be one the
// tool's schema lists (in some release), name-like ones strings, and a
// text within MemPalace's cap on it (catalogue.OverCap).
func checkArgs(t catalogue.Tool, args map[string]any) *badRequest {
	if msg, long := catalogue.UnknownParams(t, args); msg != "" {
		return &badRequest{code: -32602, msg: msg, sent: long} // a long name cut as the audit line cuts it
	}
	if err := catalogue.CheckValues(t, args); err != nil {
		return &badRequest{code: -32602, msg: err.Error()}
	}
	if bad := checkNames("", args, stringArgs...); bad != nil {
		return bad
	}
	if over := catalogue.OverCap(t, args); over != "" { // not sent whole to the single-writer primary to be refused there
		c, _ := catalogue.TextCapOf(t)
		return &badRequest{code: -32602, msg: fmt.Sprintf("%s (%s): not forwarded, nothing written", over, c.What)}
	}
	if d, ok := args["diary"].(map[string]any); ok { // CheckValues refused another type, and null
		if bad := checkNames("diary.", d, "wing", "agent_name"); bad != nil {
			return bad
		}
	}
	items, _ := args["items"].([]any) // as diary; each an object
	for i, x := range items {
		m, _ := x.(map[string]any)
		if bad := checkNames(fmt.Sprintf("items[%d].", i), m, "wing"); bad != nil {
			return bad
		}
	}
	return invisibleFactName(t, args)
}

// factNames are the arguments naming the fact a KG write opens: its
// subject, predicate and object (a supersede's new one). An end's object
// is not among them: a fact filed before the rule is still ended.
var factNames = map[string][]string{"kg_add": {"subject", "predicate", "object"}, "kg_supersede": {"subject", "predicate", "new_object"}}

// invisibleFactName refuses a KG write that would open a fact whose
// subject, predicate or object holds a character refused in labels,
// agent names, wings and rooms as invisible (firstInvisible): every --kg
// device reads every fact, and "service_x" with a zero-width space listed
// beside "service_x" as the same name (attack99 F11).
func invisibleFactName(t catalogue.Tool, args map[string]any) *badRequest {
	for _, k := range factNames[t.Name] {
		if r, bad := firstInvisible(str(args[k])); bad {
			shown := fmt.Sprintf("%+q", str(args[k]))
			if len(str(args[k])) > maxField {
				shown = fmt.Sprintf("its value (%d bytes)", len(str(args[k])))
			}
			return &badRequest{code: -32602, msg: fmt.Sprintf("Invalid value for parameter '%s': %s holds a control, zero-width or other invisible character (U+%04X), which shows one fact's name as another's; no device files a fact so named (fix: remove it)", k, shown, r)}
		}
	}
	return nil
}

// checkNames refuses an argument of m named in strs that is not a
// string, then a name argument (nameArgs) that MemPalace would strip,
// naming it (at prefixes nested ones) and the name to send.
func checkNames(at string, m map[string]any, strs ...string) *badRequest {
	for _, k := range strs {
		if v, ok := m[k]; ok {
			if _, isStr := v.(string); !isStr {
				return &badRequest{code: -32602, msg: fmt.Sprintf("Invalid value for parameter '%s%s': must be a string", at, k)}
			}
		}
	}
	for _, k := range nameArgs {
		if s, ok := m[k].(string); ok && padded(s) {
			msg := fmt.Sprintf("Invalid value for parameter '%s%s': %q has whitespace at its start or end, which MemPalace strips (the gateway authorizes names as sent); send %q", at, k, s, catalogue.SanitizedName(s))
			if len(s) > maxField { // not echoed, twice, at any length
				msg = fmt.Sprintf("Invalid value for parameter '%s%s': its value (%d bytes) has whitespace at its start or end, which MemPalace strips (the gateway authorizes names as sent); send it without", at, k, len(s))
			}
			return &badRequest{code: -32602, msg: msg}
		}
	}
	return nil
}

// padded reports a name whose first or last character is whitespace as
// Python's str.strip() sees it.
func padded(s string) bool { return catalogue.SanitizedName(s) != s }

// encode is the message the upstream receives: the parsed envelope, with
// a tools/call's arguments as authorized (and stamped).
func (r *rpcRequest) encode() []byte {
	out := maps.Clone(r.msg)
	if r.Method == "tools/call" {
		p := maps.Clone(r.msg["params"].(map[string]any))
		p["name"], p["arguments"] = r.Tool, r.Args
		out["params"] = p
	}
	return encodeJSON(out)
}

// rawID is the request's id for an answer ("null" when absent).
func (r *rpcRequest) rawID() json.RawMessage {
	if r == nil || r.id == nil {
		return json.RawMessage("null")
	}
	return encodeJSON(r.id)
}

// rpcErr is a JSON-RPC error answer to id (an empty id: null).
func rpcErr(id json.RawMessage, code int, msg string, data any) map[string]any {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": e}
}

func rpcErrBytes(id json.RawMessage, code int, msg string) []byte {
	return encodeJSON(rpcErr(id, code, msg, nil))
}

// parseQuery is the query step of a GET route: each parameter at most
// once and only those the route knows; empty values are dropped (as
// Python's parse_qsl does). The upstream gets rebuildQuery's output, so
// it sees exactly the parameters checked here.
func parseQuery(raw string, allowed []string) (map[string]string, error) {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	q := map[string]string{}
	for k, vs := range vals {
		if len(vs) > 1 {
			return nil, fmt.Errorf("query parameter %q given %d times", clip(k, maxField), len(vs))
		}
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("unknown query parameter %q", clip(k, maxField)) // not echoed in full
		}
		if vs[0] != "" {
			q[k] = vs[0]
		}
	}
	return q, nil
}

func rebuildQuery(q map[string]string) string {
	v := url.Values{}
	for k, x := range q {
		v.Set(k, x)
	}
	return v.Encode()
}

// meta is the request's params._meta (nil when it has none): the marks
// an edge or a join puts on a write (ledger and origin keys).
func (r *rpcRequest) meta() map[string]any {
	params, _ := r.msg["params"].(map[string]any)
	meta, _ := params["_meta"].(map[string]any)
	return meta
}
