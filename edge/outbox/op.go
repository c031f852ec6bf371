package outbox

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
)

// State is where an op is in its life.
type State string

const (
	// Queued: waiting to be sent (again, after a failed attempt).
	Queued State = "queued"
	// Inflight: being sent; after a crash, maybe applied.
	Inflight State = "inflight"
	// Done: the primary has it (or an operator dropped it or recorded it
	// as delivered: Error says).
	Done State = "done"
	// Dead: the primary refused it MaxRefusals times; it holds back the
	// ops that share a causal key with it until an operator retries or
	// drops it.
	Dead State = "dead"
	// InDoubt: a send may have landed and nothing can look it up (an
	// artifact or a task, with no op-id ledger to ask): it is never sent
	// again unless an operator says so (retry: send it again; delivered:
	// record it as landed). It holds back only its own causal keys.
	InDoubt State = "indoubt"
	// Held: written while the replication policy did not parse; sent once
	// it parses and replicates the op's wings (the edge releases it).
	Held State = "held"
	// Intent: written before the write was sent to the local palace,
	// whose answer settles it (intent.go); never sent as it is. One a
	// killed edge left is held by the next (ResolveIntents); one whose
	// edge still runs is left to it.
	Intent State = "intent"
)

func (s State) String() string { return string(s) }

// Pending reports a state that is not final: the op still holds its keys.
func (s State) Pending() bool { return s != Done }

// Op is one queued write.
type Op struct {
	LocalSeq     int64  `json:"local_seq"`
	ID           string `json:"op_id"`
	OriginDevice string `json:"origin_device"`
	OriginLabel  string `json:"origin_label"`
	Tool         string `json:"tool_name"`
	// Payload is the arguments as they are sent: the agent's own bytes,
	// with only what the edge stamps spliced in.
	Payload       json.RawMessage `json:"payload_json"`
	Wing          string          `json:"wing"`
	Lane          catalogue.Lane  `json:"lane"`
	Ordinal       int             `json:"ordinal,omitempty"`
	State         State           `json:"state"`
	Attempts      int             `json:"attempts"`
	Refusals      int             `json:"refusals"`
	NextAttemptAt time.Time       `json:"next_attempt_at"`
	CreatedAt     time.Time       `json:"created_at"`
	FlushedAt     *time.Time      `json:"flushed_at,omitempty"`
	Error         json.RawMessage `json:"error_json,omitempty"`
	Result        json.RawMessage `json:"result_json,omitempty"`
	// MaybeApplied: an attempt may have landed without an answer (a lost
	// reply, a kill while in flight). It sticks until the op is done: the
	// op is never sent again before a look-up says it is not there.
	MaybeApplied bool `json:"maybe_applied"`
	// Resend: an operator said to send an op in doubt again, whether or
	// not its first send landed; it lasts until a send of it may have
	// reached the gateway (resendTaken).
	Resend bool `json:"resend,omitempty"`
	// TokenDevice is the device the gateway named this edge's token when
	// the op was queued, as last heard for the token it is queued with
	// (KeepDeviceSeen; "": no gateway answer heard under it yet, or none
	// behind the primary). An op whose TokenDevice the gateway no longer
	// names the token is held, and so is one recording none queued under
	// another token (queuedUnder), or one from before ops recorded it
	// (premigration) whose OriginDevice the gateway lists as removed
	// (otherdevice.go).
	TokenDevice string `json:"token_device,omitempty"`
	// premigration: the op was queued by an edge before ops recorded
	// TokenDevice, and the migration found no device heard to record
	// (queuedAsSeen; token_device is unrecorded in the file).
	premigration bool
	// queuedUnder: with TokenDevice "", the fingerprint of the token the
	// op was queued under (tokenPrint; "": none known).
	queuedUnder string
	// unnamed are the diary entry ids an attempt's payload names whose
	// copy on the primary is not known (primaryIDs): a delete the primary
	// answers "Drawer not found" may not have reached the entry.
	unnamed []string
	// timedOut: this attempt's send ran out of its bound (settle counts
	// it in the op's timeouts).
	timedOut bool
}

// Short is the op id's first shortID hex digits, as tables print it; every
// command accepts it or the full id.
func (o Op) Short() string { return o.ID[:min(len(o.ID), shortID)] }

const shortID = 12

// Write is one write to queue.
type Write struct {
	// Name is the tool as the agent called it; Tool its catalogue record
	// (the caller's, when it has it; looked up by Name when it is zero).
	Name string
	Tool catalogue.Tool
	// Payload is the arguments as the agent sent them; they are kept and
	// sent as they are. Args is them parsed, when the caller has them.
	Payload json.RawMessage
	Args    map[string]any
	// Given is the size of the arguments as the agent sent them when
	// Payload is them with the edge's added_by stamp spliced in (0:
	// Payload is as sent): a refusal for size names both (TooLargeError).
	Given int
	// Wing is the wing the write touches ("" for none).
	Wing string
	// Ordinal: for a replay of history (join), this write is the n-th of
	// the equal records the local palace holds (a diary entry written
	// twice with one text), so the primary must hold n of them. An edge's
	// add_drawer its local palace answered already_exists is 1: a replay
	// of the drawer that palace holds, which the flusher marks as one
	// (WithReplay), so a gateway does not file again what an admin
	// deleted on the primary. A checkpoint's is the bits of its items
	// (bit i: item i, of the first MaxReplayItems) the local palace
	// listed as duplicates of the very drawer each would file: the
	// flusher names them (ReplayItemsFrom), and a gateway drops those an
	// admin deleted on the primary. An edge's kg_invalidate (kg_supersede)
	// of a triple (old object) its local palace holds no fact of, open or
	// closed, is EndsNothing.
	Ordinal int
	// Held: the replication policy did not parse; the op waits (Held)
	// until it does.
	Held bool
	// Intent: the write is about to be sent to the local palace, whose
	// answer settles the op (Promote, Abandon; intent.go). Entry is then
	// Promote's.
	Intent bool
	// Base is an update_drawer's (or a delete_drawer's) origin.Base of the
	// text the local palace held before it ("": none): kept beside the op
	// (meta base:<op id>) and sent in params._meta (WithBase), so a
	// gateway refuses the write if the primary's text changed since.
	Base string
	// Entry is the local palace's id of the diary entry the write makes
	// ("": none): a delete of that entry finds this op by it (meta
	// entry:<id>, CancelUnsentDiaries).
	Entry string
}

// The primary's request cap: MemPalace's _HTTP_MAX_REQUEST_BYTES (a
// devbox-config gateway has the same). An op whose arguments leave no
// room in it for the JSON-RPC envelope is refused when it is queued.
const (
	MaxRequest = 16 << 20
	envelope   = 1 << 10 // jsonrpc, id, method, name, _meta with the op id: under 300 bytes
	MaxPayload = MaxRequest - envelope
)

// TooLargeError refuses an op that could never be sent: its arguments
// exceed what the primary accepts in one request. Size is the arguments
// as the agent sent them, Sent those with what the edge splices in (0:
// nothing), the size checked; Added names what that is ("": the op id).
// Where the write stays is the caller's to say: the local palace has a
// palace write, nothing has a coordination write.
type TooLargeError struct {
	Tool            string
	Size, Sent, Cap int
	Added           string
}

func (e *TooLargeError) Error() string {
	size := fmt.Sprintf("%d bytes of arguments", e.Size)
	if e.Sent > e.Size {
		size += fmt.Sprintf(" (%d with %s the edge adds)", e.Sent, cmp.Or(e.Added, "the op id"))
	}
	return fmt.Sprintf("%s: %s, over the %d the primary accepts in one request (16 MiB less the envelope)", e.Tool, size, e.Cap)
}

// Enqueue adds a write under a new op id (NewOpID): no two ops, of one
// outbox or of two, share it. Coordination writes get
// metadata.edge_op_id = op_id spliced into the payload, so an ambiguous
// send can be looked up instead of repeated. An identical add_drawer or
// checkpoint already queued is returned as it is.
func (s *Store) Enqueue(ctx context.Context, w Write) (Op, error) {
	tool, rec := w.Name, w.Tool
	if !rec.Known() {
		rec, _ = catalogue.Lookup(tool)
	}
	args := w.Args
	if args == nil {
		if err := json.Unmarshal(w.Payload, &args); err != nil || args == nil {
			return Op{}, fmt.Errorf("outbox: payload of %s: not a JSON object", tool)
		}
	}
	if len(w.Payload) > MaxPayload {
		if w.Given > 0 && w.Given < len(w.Payload) {
			return Op{}, &TooLargeError{Tool: tool, Size: w.Given, Sent: len(w.Payload), Cap: MaxPayload, Added: "the added_by stamp"}
		}
		return Op{}, &TooLargeError{Tool: tool, Size: len(w.Payload), Cap: MaxPayload}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	dedupe, twin, err := queuedTwin(ctx, tx, rec, w)
	if err != nil {
		return Op{}, err
	}
	if twin > 0 {
		tx.Rollback() // read only so far: nothing to undo
		return s.Get(ctx, twin)
	}
	op, err := s.newOp(ctx, tx, rec, w)
	if err != nil {
		return Op{}, err
	}
	if err := s.insertOp(ctx, tx, op, cmp.Or(dedupe, "op:"+op.ID), w, rec.CausalKeys(args)); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	if err := s.recordQueuedFor(ctx, tx); err != nil {
		return Op{}, fmt.Errorf("outbox: recording the primary: %w", err)
	}
	if !w.Intent { // the local palace applied it: an intent's Promote says so
		if err := forgetTook(ctx, tx, w.Name, w.Payload); err != nil {
			return Op{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	switch op.State {
	case Queued:
		s.ringAll()
	case Intent: // other edges' flushers look at its owner's lock from now on (Flusher.Adopt): its death rings nothing
		s.ringOthers()
	}
	return op, nil
}

// queuedTwin is the dedupe key of a server-deduped write (add_drawer,
// checkpoint) by its content, and the local_seq of an identical one still
// queued or in flight (0 when there is none: local_seqs start at 1).
func queuedTwin(ctx context.Context, tx *sql.Tx, rec catalogue.Tool, w Write) (dedupe string, twin int64, err error) {
	if rec.Replay != catalogue.ServerDeduped || w.Held || w.Intent {
		return "", 0, nil
	}
	canon, err := canonical(w.Payload)
	if err != nil {
		return "", 0, fmt.Errorf("outbox: payload of %s: %w", w.Name, err)
	}
	dedupe = "content:" + hash(w.Name, string(canon))
	err = tx.QueryRowContext(ctx, `SELECT local_seq FROM ops WHERE dedupe_key=? AND state IN ('queued','inflight')`, dedupe).Scan(&twin)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("outbox: %w", err)
	}
	return dedupe, twin, nil
}

// newOp is the write as the next op: its local_seq, op id and state, and
// the op id stamped into a payload that carries it.
func (s *Store) newOp(ctx context.Context, tx *sql.Tx, rec catalogue.Tool, w Write) (Op, error) {
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name='ops'), 0)`).Scan(&seq); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	seq++
	var device string
	if err := tx.QueryRowContext(ctx, queuedAsID, s.deviceSeenKey(), MetaDeviceSeen).Scan(&device); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	op := Op{TokenDevice: device, queuedUnder: s.tokenPrint(), LocalSeq: seq, ID: NewOpID(), OriginDevice: s.device, OriginLabel: s.label, Tool: w.Name,
		Payload: w.Payload, Wing: w.Wing, Lane: rec.Lane(), Ordinal: w.Ordinal, State: Queued, CreatedAt: s.now()}
	switch {
	case w.Intent:
		op.State = Intent
	case w.Held:
		op.State = Held
	}
	if rec.OpStamp {
		var err error
		if op.Payload, err = stampOpID(w.Payload, op.ID); err != nil {
			return Op{}, fmt.Errorf("outbox: payload of %s: %w", w.Name, err)
		}
		if len(op.Payload) > MaxPayload {
			return Op{}, &TooLargeError{Tool: w.Name, Size: len(w.Payload), Sent: len(op.Payload), Cap: MaxPayload}
		}
	}
	return op, nil
}

// insertOp writes op with its dedupe key, its causal keys and, for an
// entry's write, the entry's mapping to it.
func (s *Store) insertOp(ctx context.Context, tx *sql.Tx, op Op, dedupe string, w Write, keys []string) error {
	owner := "" // an intent names this Store: another process leaves it while this one runs (live.go)
	if w.Intent {
		owner = s.owner
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO ops(local_seq, op_id, dedupe_key, origin_device, origin_label, tool_name, payload_json, wing, lane, ordinal, state, created_at, owner, token_device)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, op.LocalSeq, op.ID, dedupe, s.device, s.label, op.Tool, string(op.Payload), op.Wing, op.Lane.String(), op.Ordinal, op.State.String(), op.CreatedAt.UnixMilli(), owner, op.tokenColumn())
	if err != nil {
		return err
	}
	if err := insertKeys(ctx, tx, op.LocalSeq, keys); err != nil {
		return err
	}
	if w.Base != "" {
		if err := setMeta(ctx, tx, baseKey(op.ID), w.Base); err != nil {
			return err
		}
	}
	if w.Entry != "" && !w.Intent {
		return setMeta(ctx, tx, entryKey(w.Entry), op.ID)
	}
	return nil
}

// baseKey is the meta key of op id's base (Write.Base).
func baseKey(id string) string { return baseNotes + id }

// baseNotes prefixes the meta key of an op's base (baseKey).
const baseNotes = "base:"

// queuedAsKey is the meta key of the device op id was first queued as,
// kept when a retry sends it as another (RetryAs).
func queuedAsKey(id string) string { return queuedAsNotes + id }

// queuedAsNotes prefixes queuedAsKey.
const queuedAsNotes = "queued-as:"

// NewOpID is a new op's id: 256 bits from crypto/rand, stored with the op
// and never made again from it. Nothing in a copy of the outbox's file,
// however made (a disk image keeps its inode and its identity), lets the
// copy make an id the original makes.
func NewOpID() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Kick wakes this process's flusher (Enqueue also rings the doorbell of
// every other process's) and signals Kicked.
func (s *Store) Kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.signalKicked()
}

// signalKicked signals Kicked alone (the flusher is awake already).
func (s *Store) signalKicked() {
	select {
	case s.kicked <- struct{}{}:
	default: // one is pending already
	}
}

// canonical re-encodes JSON with sorted keys and no HTML escaping: the
// key under which identical queued writes are one op (never what is
// sent).
func canonical(raw json.RawMessage) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p) // a hash never fails a write
	}
	return hex.EncodeToString(h.Sum(nil))
}

// stampOpID splices metadata.edge_op_id into the payload, every other
// byte as it was.
func stampOpID(payload []byte, opID string) ([]byte, error) {
	payload = append([]byte(nil), payload...) // sjson may write into its input: the caller's bytes stay theirs
	if m := gjson.GetBytes(payload, "metadata"); m.Exists() && !m.IsObject() && m.Type != gjson.Null {
		return payload, nil // not an object: the primary refuses it, with its own words
	} else if m.Type == gjson.Null && m.Exists() {
		var err error
		if payload, err = sjson.SetRawBytes(payload, "metadata", []byte("{}")); err != nil {
			return nil, err
		}
	}
	return sjson.SetBytes(payload, "metadata.edge_op_id", opID)
}
