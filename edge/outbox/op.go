package outbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
)

// State is where an op is in its life: Queued, Inflight, Done or Dead.
type State string

const (
	// Queued: waiting to be sent (again, after a failed attempt).
	Queued State = "queued"
	// Inflight: being sent; after a crash, maybe applied.
	Inflight State = "inflight"
	// Done: the primary has it (or an operator dropped it: Error says).
	Done State = "done"
	// Dead: the primary keeps refusing it; it holds the ops behind it until
	// an operator retries or drops it.
	Dead State = "dead"
)

func (s State) String() string { return string(s) }

// Op is one queued write.
type Op struct {
	LocalSeq      int64           `json:"local_seq"`
	ID            string          `json:"op_id"`
	OriginDevice  string          `json:"origin_device"`
	OriginLabel   string          `json:"origin_label"`
	Tool          string          `json:"tool_name"`
	Payload       json.RawMessage `json:"payload_json"`
	Wing          string          `json:"wing"`
	State         State           `json:"state"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt time.Time       `json:"next_attempt_at"`
	CreatedAt     time.Time       `json:"created_at"`
	FlushedAt     *time.Time      `json:"flushed_at,omitempty"`
	Error         json.RawMessage `json:"error_json,omitempty"`
	Result        json.RawMessage `json:"result_json,omitempty"`
	// MaybeApplied: an attempt may have landed without an answer (a lost
	// reply, a kill while in flight). It sticks until the op is done: the
	// op is never sent again before a look-up says it is not there.
	MaybeApplied bool `json:"maybe_applied"`
}

// Write is one write to queue.
type Write struct {
	// Name is the tool as the agent called it; Tool its catalogue record
	// (the caller's, when it has it; looked up by Name when it is zero).
	Name string
	Tool catalogue.Tool
	// Payload is the arguments to send; Wing the wing they write ("" for
	// none).
	Payload json.RawMessage
	Wing    string
}

// Enqueue adds a write. The op_id is sha256(origin_device, local_seq,
// tool, canonical payload); local_seq is allocated under SQLite's write
// lock, so it stays monotonic across every process sharing the palace.
// Coordination writes get metadata.edge_op_id = op_id stamped into the
// payload, so an ambiguous send can be looked up instead of repeated. An
// identical add_drawer/checkpoint already queued is returned as it is.
func (s *Store) Enqueue(ctx context.Context, w Write) (Op, error) {
	tool, payload, wing, rec := w.Name, w.Payload, w.Wing, w.Tool
	if !rec.Known() {
		rec, _ = catalogue.Lookup(tool)
	}
	canon, err := canonical(payload)
	if err != nil {
		return Op{}, fmt.Errorf("outbox: payload of %s: %w", tool, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	dedupe := ""
	if rec.Replay == catalogue.ServerDeduped {
		dedupe = "content:" + hash(tool, string(canon))
		var existing int64
		if err := tx.QueryRowContext(ctx, `SELECT local_seq FROM ops WHERE dedupe_key=? AND state IN ('queued','inflight')`, dedupe).Scan(&existing); err == nil {
			tx.Rollback() // read only so far: nothing to undo
			return s.Get(ctx, existing)
		}
	}
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name='ops'), 0)`).Scan(&seq); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	seq++
	opID := hash(s.device, fmt.Sprint(seq), tool, string(canon))
	if dedupe == "" {
		dedupe = "op:" + opID
	}
	stored := canon
	if rec.OpStamp {
		if stored, err = stampOpID(canon, opID); err != nil {
			return Op{}, err
		}
	}
	now := s.now()
	_, err = tx.ExecContext(ctx, `INSERT INTO ops(local_seq, op_id, dedupe_key, origin_device, origin_label, tool_name, payload_json, wing, state, created_at)
		VALUES(?,?,?,?,?,?,?,?,'queued',?)`, seq, opID, dedupe, s.device, s.label, tool, string(stored), wing, now.UnixMilli())
	if err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	s.Kick()
	s.ringAll()
	return Op{LocalSeq: seq, ID: opID, OriginDevice: s.device, OriginLabel: s.label, Tool: tool, Payload: stored, Wing: wing, State: Queued, CreatedAt: now}, nil
}

// Kick wakes this process's flusher (Enqueue also rings the doorbell of
// every other process's).
func (s *Store) Kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// canonical re-encodes JSON with sorted keys and no HTML escaping.
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

func stampOpID(canon []byte, opID string) ([]byte, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["edge_op_id"] = opID
	m["metadata"] = meta
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return canonical(b)
}
