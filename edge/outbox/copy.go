package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Copied is what an outbox knows of being a copy of another's file (a
// copied HOME, a restored backup: loadIdentity), for edge status and
// doctor to say while the device id is still the one its ops were made
// under: a second machine writing under the first one's name.
type Copied struct {
	// At is when an edge command first opened the copy and gave it an
	// identity of its own (zero: none has yet; a read-only open saw it).
	At time.Time `json:"at"`
	// Was is the original's identity, its first 8 hex digits.
	Was string `json:"was"`
	// Device is the device id the outbox's ops were made under then: the
	// one the original recorded, its last writing opener's
	// MEMPALACE_ORIGIN_DEVICE (an outbox made before that was recorded:
	// its newest op's), never the copy's opener's.
	Device string `json:"device"`
	// Next is the local_seq the first op queued after the copy was seen
	// has at least: every op below it was queued before the copy, so the
	// original holds it too (0: a record an older build made, which does
	// not say).
	Next int64 `json:"next,omitempty"`
}

// QueuedBefore reports whether op was queued before this outbox was
// copied (the original machine holds it too, and sends it under its own
// device id), and known false when c cannot say: no copy recorded (nil),
// or a record that names no Next.
func (c *Copied) QueuedBefore(op Op) (before, known bool) {
	if c == nil || c.Next == 0 {
		return false, false
	}
	return op.LocalSeq < c.Next, true
}

const metaCopied = "copied"

// copyOf is the record of this file as a copy of the outbox whose
// identity was id, seen at at: the device is the one the original
// recorded (madeUnder), never this opener's.
func (s *Store) copyOf(ctx context.Context, q querier, id string, at time.Time) (Copied, error) {
	device, err := madeUnder(ctx, q)
	if err != nil {
		return Copied{}, err
	}
	var next int64
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(local_seq), 0)+1 FROM ops`).Scan(&next); err != nil {
		return Copied{}, err
	}
	return Copied{At: at, Was: id[:min(8, len(id))], Device: device, Next: next}, nil
}

// metaDevice is the device id the outbox's ops are made under: the last
// writing opener's (recordDevice).
const metaDevice = "device"

// madeUnder is the device id the outbox's ops are made under: the one
// recorded, else (an outbox made before it was) its newest op's ("": no
// op left to say).
func madeUnder(ctx context.Context, q querier) (string, error) {
	device, err := querierMeta(ctx, q, metaDevice)
	if err != nil || device != "" {
		return device, err
	}
	err = q.QueryRowContext(ctx, `SELECT origin_device FROM ops ORDER BY local_seq DESC LIMIT 1`).Scan(&device)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return device, err
}

// recordDevice records the device id a writing open stamps on new ops
// (else the one recorded, else the newest op's), after loadIdentity has
// noted a copy under the original's: a copy made later, once its ops
// are pruned, names the device it was made under, not whoever opens it.
func (s *Store) recordDevice(ctx context.Context) error {
	kept, err := querierMeta(ctx, s.db, metaDevice)
	if err != nil {
		return err
	}
	device := s.device
	if device == "" {
		if device, err = madeUnder(ctx, s.db); err != nil {
			return err
		}
	}
	if device == kept {
		return nil // read only: an open takes no write lock it does not need
	}
	return setMeta(ctx, s.db, metaDevice, device)
}

// recordCopy keeps c in the outbox (it is copied on with the file: a copy
// of a copy records the later one over it).
func recordCopy(ctx context.Context, q querier, c Copied) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return setMeta(ctx, q, metaCopied, string(b))
}

// CopyRecord is Stats.Copied: what this open saw (read-only), else the
// record an earlier open kept (nil: no copy seen).
func (s *Store) CopyRecord(ctx context.Context) (*Copied, error) {
	if s.copy != nil {
		return s.copy, nil
	}
	return copyRecord(ctx, s.db)
}

// copyRecord is the record of being a copy q's outbox keeps (nil: none).
func copyRecord(ctx context.Context, q querier) (*Copied, error) {
	v, err := querierMeta(ctx, q, metaCopied)
	if err != nil || v == "" {
		return nil, err
	}
	var c Copied
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return nil, fmt.Errorf("outbox: its record of being a copy: %w", err)
	}
	return &c, nil
}

// ErrNoCopy: SameMachine found no record of this outbox being a copy.
var ErrNoCopy = errors.New("this outbox has no record of being a copy: edge status prints no COPY line and doctor no outbox-copied note for it, so there is nothing to dismiss")

// SameMachine records the operator's word that the copy this outbox is
// was made on the machine it came from (a backup restored, a devbox moved
// to a new disk): the record of the copy is removed, so edge status and
// doctor stop noting it, and a later copy of the file is noted again. It
// returns the record removed (ErrNoCopy when there is none).
func (s *Store) SameMachine(ctx context.Context) (Copied, error) {
	c, err := s.CopyRecord(ctx)
	if err != nil {
		return Copied{}, err
	}
	if c == nil {
		return Copied{}, ErrNoCopy
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM meta WHERE key=?`, metaCopied); err != nil {
		return Copied{}, fmt.Errorf("outbox: removing its record of being a copy: %w", err)
	}
	return *c, nil
}
