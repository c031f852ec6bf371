package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
)

// applied is the running gateway's record of what it did with its config
// file, at start and at each reload (and each retry of a refused one):
// <audit_log>.applied.json, beside its instance lock. An operator's
// command that changed the config reads it (ConfirmApplied) to tell
// whether the change is in force.
type applied struct {
	// Config is the SHA-256 (hex) of the config file's bytes it read.
	Config string `json:"config"`
	// Read is when it began to read them: a command trusts a refusal
	// only of a read after its own write (an older one, of the same
	// bytes, may be a refusal whose cause is gone).
	Read time.Time `json:"read"`
	// Refused is why it did not take them ("": it runs on them); the
	// previous config stays in force.
	Refused string `json:"refused,omitempty"`
}

// appliedSuffix names the record beside the audit log (symlinks followed).
const appliedSuffix = ".applied.json"

// RefusedError is the running gateway's refusal of the config as it is
// now: it keeps its previous config in force.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// ErrNotConfirmed is a gateway running on the config's audit log that did
// not record a read of the config after the change within the wait: one
// older than this release writes no record.
var ErrNotConfirmed = errors.New("the running gateway has not confirmed it took this change")

// ErrUndone is a change the file no longer holds when the running gateway
// reads it: a later edit undid it (a hand save from a copy opened before
// the command), so the gateway does not enforce it.
var ErrUndone = errors.New("a later edit of the file undid this change")

// noteApplied records what Open or Reload did with the config's bytes of
// sum, read from read on (refused: why not). Only the gateway that holds
// the audit log's lock writes it (a second one, refused at start, must
// not speak for the running one), and not when it read no bytes.
func (s *Server) noteApplied(sum string, read time.Time, refused error) {
	if s.instance == nil || s.instance.f == nil || sum == "" {
		return
	}
	a := applied{Config: sum, Read: read}
	if refused != nil {
		a.Refused = refused.Error()
	}
	b, _ := json.Marshal(a) // strings and a time: it cannot fail
	if _, err := filewrite.Write(s.instance.applied, append(b, '\n'), 0o600); err != nil {
		s.Log.Warn("the record of the config in force is not written: an operator's config change cannot be confirmed", "err", err)
	}
}

// ConfirmApplied waits up to wait for the gateway running on file's audit
// log to record what it did with the file as it is now: a record of its
// bytes (SHA-256), of a read after since (when the caller began to write
// it) or one it took (it runs on those bytes, whenever it read them). A
// later writer's bytes (two commands at once) count as the caller's when
// holds, given the config they parse to, finds the caller's change in
// them (nil: any bytes). It returns nil once the gateway runs on bytes
// that hold the change, or at once when no gateway holds the log's lock
// (nothing to confirm); ErrUndone when the file it read no longer holds
// the change (a later edit undid it); a *RefusedError when it refused
// them; ErrNotConfirmed when it said nothing in time; another error when
// it cannot tell (one wrapping fs.ErrPermission: this user may not open
// the lock or the record).
func ConfirmApplied(file string, since time.Time, wait time.Duration, holds func(*Config) bool) error {
	c, _, err := loadConfig(file)
	if err != nil {
		return err
	}
	log, err := filewrite.Resolve(c.AuditLog)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // a dangling link: no audit log, no gateway on it
	case err != nil:
		return fmt.Errorf("audit_log: %w", err)
	}
	if h, err := holderAt(log); err != nil || h == nil {
		return err // none runs on it, or this user cannot tell
	}
	record := log + appliedSuffix
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		var a applied
		b, err := os.ReadFile(record)
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("the record of the config in force: %w", err)
		}
		if err == nil && json.Unmarshal(b, &a) == nil && (a.Read.After(since) || a.Refused == "") {
			if known, held := heldIn(file, a.Config, holds); known {
				switch {
				case !held:
					return ErrUndone
				case a.Refused != "":
					return &RefusedError{a.Refused}
				}
				return nil
			}
		}
		if time.Now().After(deadline) {
			return ErrNotConfirmed
		}
	}
}

// heldIn reports whether file holds the bytes of sum (known; else the
// gateway read other bytes, and reads these next) and, if so, whether
// the config they parse to holds the change (bytes that do not parse,
// which the gateway refused, are left to its refusal).
func heldIn(file, sum string, holds func(*Config) bool) (known, held bool) {
	b, err := os.ReadFile(file)
	if h := sha256.Sum256(b); err != nil || hex.EncodeToString(h[:]) != sum {
		return false, false
	}
	if holds == nil {
		return true, true
	}
	c, err := parseConfig(file, b)
	return true, err != nil || holds(c)
}
