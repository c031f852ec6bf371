package gateway

import (
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
)

// applied is the running gateway's record of what it did with its config
// file, at start and at each reload: <audit_log>.applied.json, beside its
// instance lock. An operator's command that changed the config reads it
// (ConfirmApplied) to tell whether the change is in force.
type applied struct {
	// Config is the SHA-256 (hex) of the config file's bytes it read.
	Config string `json:"config"`
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
// not record the config as it is now within the wait: one older than this
// record writes none, and one that missed the change has not read it.
var ErrNotConfirmed = errors.New("the running gateway has not confirmed it took this change")

// noteApplied records what Open or Reload did with the config's bytes of
// sum (refused: why not). Only the gateway that holds the audit log's lock
// writes it (a second one, refused at start, must not speak for the
// running one), and not when it read no bytes.
func (s *Server) noteApplied(sum string, refused error) {
	if s.instance == nil || s.instance.f == nil || sum == "" {
		return
	}
	a := applied{Config: sum}
	if refused != nil {
		a.Refused = refused.Error()
	}
	b, _ := json.Marshal(a) // two strings: it cannot fail
	if _, err := filewrite.Write(s.instance.applied, append(b, '\n'), 0o600); err != nil {
		s.Log.Warn("the record of the config in force is not written: an operator's config change cannot be confirmed", "err", err)
	}
}

// ConfirmApplied waits up to wait for the gateway running on file's audit
// log to record that it read file as it is now: nil once it runs on it,
// or at once when no gateway holds the log's lock (nothing to confirm); a
// *RefusedError when it refused it; ErrNotConfirmed when it said nothing
// in time.
func ConfirmApplied(file string, wait time.Duration) error {
	c, sum, err := loadConfig(file)
	if err != nil {
		return err
	}
	log, err := filewrite.Resolve(c.AuditLog)
	if err != nil || !instanceRunning(log) {
		return nil // no audit log, or no gateway on it
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		var a applied
		b, err := os.ReadFile(log + appliedSuffix)
		if err == nil && json.Unmarshal(b, &a) == nil && a.Config == sum {
			if a.Refused != "" {
				return &RefusedError{a.Refused}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return ErrNotConfirmed
		}
	}
}
