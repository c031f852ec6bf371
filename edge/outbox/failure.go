package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/mailbox"
)

// Kind is how an attempt to send an op failed, as its error_json's
// "kind" records it; every kind belongs to one Class, whose rule the
// flusher applies (Rules; docs/replication.md has the same table).
type Kind string

const (
	// Unreachable: the request never left (no connection, the breaker
	// open, the handshake failed).
	Unreachable Kind = "unreachable"
	// Busy: the primary answered "not now" (read-only, another writer,
	// locked, rate limited, the op in flight at the gateway): not applied.
	Busy Kind = "busy"
	// Unauthorized: the primary refused the token (HTTP 401/403).
	Unauthorized Kind = "unauthorized"
	// Refused: the primary answered no (a JSON-RPC error, success:false,
	// isError, a gateway's denial): not applied.
	Refused Kind = "refused"
	// Lost: the request may have reached the primary and no answer came
	// (a timeout after sending, a connection cut, an upstream's answer
	// lost behind a gateway, a gateway that crashed mid-forward).
	Lost Kind = "lost"
	// Dropped and Delivered are an operator's records, Local the policy's
	// (a held op whose wing it keeps local): not attempts.
	Dropped   Kind = "dropped"
	Delivered Kind = "delivered"
	Local     Kind = "local"
	// Cancelled: an add whose drawer this device deleted before it was sent.
	Cancelled Kind = "cancelled"
	// Gone: a delete_drawer the primary answered "Drawer not found": the
	// drawer is not there, as the delete wanted; done, nothing to resend.
	// Also a kg_invalidate of a fact neither palace holds (endsNothing).
	Gone Kind = "gone"
	// DeletedOnPrimary: a join's write the gateway refused because an
	// admin deleted the record on the primary (its trash holds it, not
	// restored): done, nothing written, not to be sent again. An edge's
	// replay so refused (an add_drawer its local palace answered
	// already_exists), or an update_drawer of such a drawer, is dead at
	// once: the agent is told, and an operator retries it (after a
	// restore) or drops it.
	DeletedOnPrimary Kind = "deleted-on-primary"
	// ChangedOnPrimary: an update_drawer a gateway refused because the
	// drawer's text on the primary is no longer the one the local palace
	// held when the edit was made (its base: another device changed it
	// since; ledger.CodeChangedOnPrimary): dead at once, not counted as a
	// refusal, told to the agent. An operator's retry sends it without
	// the base (overwriting the primary's text); a drop keeps theirs.
	ChangedOnPrimary Kind = "changed-on-primary"
	// AlreadyClosed: a kg_invalidate a gateway answered success with the
	// fact already closed on the primary before it arrived (another
	// device's end first): done, nothing changed there, its end date not
	// kept; noted, not sent again.
	AlreadyClosed Kind = "already-closed"
	// AlreadyCurrent: a kg_add a gateway answered held by a fact current
	// on the primary before it arrived, another device's or with other
	// dates, or a kg_supersede of a fact closed there while another value
	// was current (its answer's held_by and note): done, nothing filed;
	// noted and told as AlreadyClosed (DeadOp.Closed).
	AlreadyCurrent Kind = "already-current"
	// OtherDevice: an op queued while the gateway named this token one
	// device (its token_device) that the gateway now names another (the
	// device removed, its writes queued meanwhile, and .env given another
	// device's token): dead, never sent, until an operator retries it
	// (sent as the device the gateway names, Failure.Device) or drops it.
	OtherDevice Kind = "other-device"
)

func (k Kind) String() string { return string(k) }

// Class is a failure class: what the flusher does about a kind of failure.
type Class string

const (
	Transient Class = "transient" // not applied: try again after a backoff, for ever
	Refusal   Class = "refused"   // not applied: dead after MaxRefusals attempts
	Ambiguous Class = "ambiguous" // maybe applied: look up before any resend
)

// Rule is a kind's class and what it means for the op.
type Rule struct {
	Class Class
	// CountsTowardDead: the attempt counts toward MaxRefusals.
	CountsTowardDead bool
	// MaybeApplied: the op is never sent again before a look-up says it
	// is not on the primary (or, with no look-up, an operator says so).
	MaybeApplied bool
	// ResetWhenUp: the primary coming back, or first answering an edge
	// that starts (an authenticated handshake: the token accepted), clears
	// the backoff (the op never reached it, or was refused for the token
	// alone, so nothing was learned about the op itself). No other kind's
	// backoff is ever reset but by an operator.
	ResetWhenUp bool
	// Says is what `edge flush` and `edge status` print for it.
	Says string
}

// Rules is the one table of failure kinds and their rules.
var Rules = map[Kind]Rule{
	Unreachable:  {Class: Transient, ResetWhenUp: true, Says: "unreachable: not sent"},
	Busy:         {Class: Transient, Says: "the primary said not now: not applied"},
	Unauthorized: {Class: Transient, ResetWhenUp: true, Says: "the primary refused the token"},
	Refused:      {Class: Refusal, CountsTowardDead: true, Says: "refused by the primary"},
	Lost:         {Class: Ambiguous, MaybeApplied: true, Says: "the answer was lost: it may have landed"},
}

// Failure is an op's last failure as its error_json records it.
type Failure struct {
	Kind    Kind   `json:"kind"`
	Message string `json:"message"` // the primary's words ("": none)
	// Device is, for OtherDevice, the device the gateway named the token.
	Device string `json:"device,omitempty"`
	// AsWritten: a dead op refused as written (deadAtOnce), which no
	// retry lands and which holds nothing back: dropped, not retried.
	AsWritten bool `json:"as_written,omitempty"`
	// Timeouts: how many of the op's sends ran out of their bound (each
	// doubles the next one's, sendBound).
	Timeouts int `json:"timeouts,omitempty"`
}

// FailureOf reads an op's error_json (the zero Failure: none recorded, or
// one that does not parse).
func FailureOf(errJSON []byte) Failure {
	var f Failure
	if json.Unmarshal(errJSON, &f) != nil {
		return Failure{}
	}
	return f
}

// Words says an op's last failure (its error_json) as the failure table
// says its kind, with the primary's message ("" for none), made printable
// (mailbox.Printable): the primary's words reach a terminal and an agent.
func Words(errJSON []byte) string {
	f := FailureOf(errJSON)
	if f.Kind == "" {
		return ""
	}
	says := string(f.Kind)
	if r, ok := Rules[f.Kind]; ok {
		says = r.Says
	}
	switch {
	case f.Message == "":
		return says
	case strings.Contains(f.Message, says):
		return mailbox.Printable(f.Message) // it says so itself: once is enough
	}
	return says + ": " + mailbox.Printable(f.Message)
}

// ErrNotSent marks a failure before the request left this process (the
// primary could not be reached): the Primary wraps its error with it.
var ErrNotSent = errors.New("not sent")

// ErrUnauthorized is a 401/403 from the primary: a configuration problem,
// not an outage. The edge's Primary returns it; the flusher waits.
var ErrUnauthorized = errors.New("the primary refused the token (401/403): check MEMPALACE_REMOTE_TOKEN")

// RPCError is a JSON-RPC error answered by the primary.
type RPCError struct {
	Code    int
	Message string
	// Rule is a gateway's refusal's rule (its data.rule: "batch_cap"),
	// "" for none.
	Rule string
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// HTTPError is an HTTP status other than 2xx answered by the primary with
// no JSON-RPC answer in it.
type HTTPError struct{ Status int }

func (e *HTTPError) Error() string { return fmt.Sprintf("the primary answered HTTP %d", e.Status) }

// busyCodes are JSON-RPC answers that say "not now" about the primary,
// not "no" about the op: a server an operator repairs, a limit, a send
// elsewhere. MemPalace's gates are -32001 (another writer holds the
// palace), -32002 (its SQLite failed its check), -32003 (read-only),
// -32004 (the vector index needs a rebuild) and -32005 (a stale library);
// the devbox-config gateway's are in package ledger (CodeBodyTimeout: the
// body did not arrive in the gateway's time over a slow link, so it was
// not read; it never does over that link, until the link is faster).
var busyCodes = map[int]bool{-32001: true, -32002: true, -32003: true, -32004: true, -32005: true, ledger.CodeRateLimited: true, ledger.CodeInFlight: true, ledger.CodeBodyTimeout: true}

// lateBody reports a gateway's 408 (ledger.CodeBodyTimeout): the op's
// body did not arrive within the gateway's floor, so the link is too slow
// for it, not the primary's writes hung: its lane need not wait for it
// (behindStalled), since over that link it never lands.
func lateBody(err error) bool {
	var rpc *RPCError
	return errors.As(err, &rpc) && rpc.Code == ledger.CodeBodyTimeout
}

// busyWords in a success:false or error answer say "not now" too.
var busyWords = []string{"database is locked", "another mine is in progress", "read-only", "read only", "busy", "temporarily", "try again"}

// classify turns a send's outcome into "" (landed) or the kind of failure
// (RFC 003 §7.6: a 200 with success:false must be read, not trusted).
func classify(res map[string]any, err error) (Kind, string) {
	if err != nil {
		return classifyErr(err), err.Error()
	}
	failed := res["success"] == false
	errMsg, hasErr := res["error"]
	if !failed && !hasErr {
		return "", ""
	}
	m := fmt.Sprint(errMsg)
	if !hasErr {
		m = "success: false"
	}
	low := strings.ToLower(m)
	for _, w := range busyWords {
		if strings.Contains(low, w) {
			return Busy, m
		}
	}
	return Refused, m
}

// invalidWords are MemPalace's own refusals of a write's arguments
// (logstream.py's checks, answered success false): a body, metadata or
// name over its cap, a control character or NUL, a status or event type
// it does not know. The same write is refused every time, whatever a
// gateway's operator grants.
var invalidWords = []string{"must be a non-empty string", "exceeds maximum length of", "contains control characters", "is not one of:", "must be a string", "contains null bytes", "bytes; maximum is", "must be an object", "is not JSON-serializable", "exceeds maximum size of", "is not a valid event type", "must be a list of"}

// invalid reports a refusal in those words, a JSON-RPC "Invalid params"
// (-32602: a gateway's strict reading of the arguments, a room name with a
// trailing space; MemPalace's own) or "Invalid Request" (-32600: a
// gateway's strict parse of the bytes, a key twice): the op is dead at
// its first try.
func invalid(kind Kind, msg string, err error) bool {
	var rpc *RPCError
	return kind == Refused && (errors.As(err, &rpc) && (rpc.Code == -32602 || rpc.Code == -32600) || slices.ContainsFunc(invalidWords, func(w string) bool { return strings.Contains(msg, w) }))
}

// OpIDReused reports a primary's message that its gateway's op-id ledger
// holds the op's id for other arguments (ledger.ErrReused).
func OpIDReused(msg string) bool {
	return strings.Contains(msg, ledger.ErrReused.Error())
}

// ReusedAdvice is what an op refused as OpIDReused means: a gateway of
// another release digests the same arguments otherwise (attack56 R2: a
// gateway rolled back refused, as reused, the ops the newer one had
// recorded, though they were the same writes, most of them landed).
const ReusedAdvice = "if the gateway ran another devbox-config release since it first saw this op (a rollback), it is the same write and may have landed: do not write it anew (docs/operator.md#upgrading-and-rolling-back)"

// UnknownEvent is what an event_ack refused for the event it names means:
// a gateway answers an id it holds no event for and one of an event the
// device may not see alike ("the target is not visible to this device"),
// and MemPalace with no gateway in front "event ... not found".
const UnknownEvent = "the event id is unknown to this device: a typo, or an event it may not see; call mempalace_mailbox for the ids it owes"

// unknownEvent reports an event_ack refused for the event it names. No
// later try changes that: an event is visible to a device when one of its
// agents sent it or is its addressee, or to a coordinator, so an id its
// agent read in its mailbox is never refused so; only an operator's grant
// (--coordinator, an agent added) makes another's event visible, and an
// id that names no event never is.
func unknownEvent(op Op, kind Kind, msg string) bool {
	return kind == Refused && op.Tool == catalogue.Prefix+"event_ack" &&
		(strings.Contains(msg, deviceinfo.RuleNotVisible) || strings.HasPrefix(msg, "event ") && strings.HasSuffix(msg, " not found"))
}

// alreadyGone reports a delete_drawer refused only because the primary
// holds no such drawer (MemPalace's success false "Drawer not found"):
// another device's delete, or this one's whose answer was lost, got there
// first, or it never held it. A delete_drawers answers its missing ids as
// items of a success, which lands as it is.
func alreadyGone(op Op, kind Kind, msg string) bool {
	return kind == Refused && op.Tool == catalogue.Prefix+"delete_drawer" && strings.HasPrefix(msg, "Drawer not found")
}

// EndsNothing is the Ordinal of an edge's kg_invalidate, or kg_supersede,
// of a triple (its old object) the local palace held no fact of, open or
// closed, when it was made: MemPalace answered it success and ended
// nothing there (a supersede opened its new object, as an add).
const EndsNothing = 1

// endsNothing reports a gateway's refusal of such an end because the
// primary holds no fact of its triple either (ledger.CodeNotOnPrimary): it
// ends nothing anywhere (an agent's typo, a supersede used as an add), so
// a kg_invalidate is done and a kg_supersede sent as its add (asAdd), not
// sent again until dead with its objects' later KG writes held behind it
// (review32 R5). Without the mark (the local palace held the fact) the
// refusal is any refusal: its kg_add may still be on its way.
func endsNothing(op Op, err error) bool {
	var rpc *RPCError
	return op.Ordinal == EndsNothing && (op.Tool == catalogue.Prefix+"kg_invalidate" || op.Tool == catalogue.Prefix+"kg_supersede") && errors.As(err, &rpc) && rpc.Code == ledger.CodeNotOnPrimary
}

// deletedOnPrimary reports a gateway's refusal of a join's write of a
// record an admin deleted on the primary (ledger.CodeDeletedOnPrimary).
func deletedOnPrimary(err error) bool {
	var rpc *RPCError
	return errors.As(err, &rpc) && rpc.Code == ledger.CodeDeletedOnPrimary
}

// RuleBatchCap is a gateway's rule refusing a checkpoint carrying more
// content than a device may file in one call (docs/operator.md, Fairness).
const RuleBatchCap = "batch_cap"

// batchCapped reports a gateway's refusal of a checkpoint over its batch
// cap: the same checkpoint is refused every time, whatever is granted.
func batchCapped(err error) bool {
	var rpc *RPCError
	return errors.As(err, &rpc) && rpc.Rule == RuleBatchCap
}

// changedOnPrimary reports a gateway's refusal of an update_drawer whose
// drawer changed on the primary since the edit (ledger.CodeChangedOnPrimary).
func changedOnPrimary(err error) bool {
	var rpc *RPCError
	return errors.As(err, &rpc) && rpc.Code == ledger.CodeChangedOnPrimary
}

func classifyErr(err error) Kind {
	var rpc *RPCError
	var st *HTTPError
	switch {
	case errors.Is(err, ErrUnauthorized):
		return Unauthorized
	case errors.Is(err, ErrNotSent):
		return Unreachable
	case errors.Is(err, errPermanent):
		return Refused
	case errors.Is(err, ErrLookup):
		// The write was not sent; the op stays as maybe applied as it was.
		if lookUpRefused(err) {
			return Refused // the look-up can never succeed: dead, for an operator
		}
		return Busy
	case errors.As(err, &rpc):
		switch {
		case rpc.Code == ledger.CodeInDoubt:
			return Lost
		case busyCodes[rpc.Code]:
			return Busy
		}
		return Refused
	case errors.As(err, &st):
		switch {
		case st.Status == 429 || st.Status == 503:
			return Busy
		case st.Status == 401 || st.Status == 403:
			return Unauthorized
		case st.Status >= 500:
			return Lost // a proxy in front whose upstream dropped: maybe applied
		}
		return Refused
	}
	return Lost
}

var errPermanent = errors.New("permanent")
