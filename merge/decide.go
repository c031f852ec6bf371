// Package merge holds the three ways devbox-config changes a harness
// config: a comment-preserving JSONC splice of one subtree (Doc), pi's
// "live wins" settings merge (FillMissing), and the decision table that
// says when the environment may overwrite a managed subtree (Decide).
package merge

import (
	"github.com/joakimp/devbox-config/fingerprint"
)

// Action is what Decide says to do with a managed subtree.
type Action string

const (
	// Unchanged: the live value already is the desired one. Write nothing;
	// make sure the record says so (this is also "adopt").
	Unchanged Action = "unchanged"
	// Insert the desired value where there is none.
	Insert Action = "insert"
	// Replace the live value, which is what devbox-config last wrote.
	Replace Action = "replace"
	// Remove the live value, which is what devbox-config last wrote, because
	// nothing should be registered now.
	Remove Action = "remove"
	// KeepEdit keeps a value the user changed; the desired value goes to a
	// .proposed sidecar.
	KeepEdit Action = "kept-user-edit"
	// KeepDeleted respects a subtree the user deleted: it is not recreated.
	KeepDeleted Action = "kept-user-deletion"
)

// Input is one target's state. nil values mean absent.
type Input struct {
	Live    []byte
	Desired []byte
	// Record is the fingerprint devbox-config last wrote ("" if there is no
	// record at all, fingerprint.Absent if it last decided "nothing").
	Record string
	// Reclaim lets the environment win over a user's edit or deletion.
	Reclaim bool
}

// Decide applies the decision table of RFC 001 Phase 1.5 (issue: "Env wins,
// but only over what we wrote"):
//
//	live               record      action
//	equals desired     any         Unchanged (record it; drop a stale .proposed)
//	absent             none        Insert
//	absent             absent      Insert (we removed it ourselves)
//	absent             a value     KeepDeleted (Insert with --reclaim)
//	equals record      a value     Replace / Remove (env wins)
//	differs            a value     KeepEdit (.proposed)
//	present            none        KeepEdit (volume from the old generator)
//
// With --reclaim the last two rows also let the environment win.
func Decide(in Input) (Action, error) {
	same, err := fingerprint.Equal(in.Live, in.Desired)
	if err != nil {
		return "", err
	}
	if same {
		return Unchanged, nil
	}
	write := Replace
	if in.Live == nil {
		write = Insert
	} else if in.Desired == nil {
		write = Remove
	}
	if in.Reclaim {
		return write, nil
	}
	if in.Live == nil {
		if in.Record == "" || in.Record == fingerprint.Absent {
			return Insert, nil
		}
		return KeepDeleted, nil
	}
	if in.Record == "" {
		return KeepEdit, nil
	}
	liveFP, err := fingerprint.Of(in.Live)
	if err != nil {
		return "", err
	}
	if liveFP == in.Record {
		return write, nil
	}
	return KeepEdit, nil
}
