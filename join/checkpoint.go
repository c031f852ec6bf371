package join

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/filewrite"
)

// CheckpointFile is the join state's name inside <palace>/edge (RFC 001
// §4.4): in the palace, not the container, so a recreate or a second
// container on the same palace sees that it has joined.
const CheckpointFile = "bootstrap.json"

// TargetState is one primary's entry in bootstrap.json.
type TargetState struct {
	// JoinedAt is when a join to this target last completed (nil while
	// the first one is under way).
	JoinedAt *time.Time `json:"joined_at"`
	// HighWater is the join outbox's highest local_seq settled: every op
	// up to it reached the primary or was reported failed.
	HighWater int64 `json:"high_water"`
	// Counts are the last run's sent and skipped records by type.
	Counts map[string]map[string]int `json:"counts"`
	// State is StateInProgress while ops are queued, then StateComplete,
	// or StateFailed when a record was refused, in doubt or mismatched.
	State State `json:"state"`
	// Failed counts the records that failed or mismatched in the last run.
	Failed    int       `json:"failed"`
	UpdatedAt time.Time `json:"updated_at"`
	// Outbox is the join outbox file, relative to <palace>/edge.
	Outbox string `json:"outbox"`
}

// State is a target's join state in bootstrap.json.
type State string

const (
	StateInProgress State = "in_progress"
	StateComplete   State = "complete"
	StateFailed     State = "failed"
)

func (s State) String() string { return string(s) }

func checkpointPath(palace string) string { return filepath.Join(palace, "edge", CheckpointFile) }

// errLinked: join's own state file is a symlink, which it never follows
// (planted in the palace, it could name any file the join may read or
// write).
var errLinked = errors.New("is a symlink: devbox-config join never follows one in its own state; remove it")

// readCheckpoint reads bootstrap.json (missing: no join yet).
func readCheckpoint(palace string) (map[string]TargetState, error) {
	file := checkpointPath(palace)
	if fi, err := os.Lstat(file); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s: %w", file, errLinked)
	}
	b, err := filewrite.ReadRegular(file, 16<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]TargetState{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	m := map[string]TargetState{}
	if err := (confpos.JSON{}).DecodeJSON(file, b, &m); err != nil {
		const aside = "move it aside to start over: the join outbox still knows what was sent"
		var pe *confpos.Error
		if errors.As(err, &pe) {
			pe.Fix += "; or " + aside
			return nil, pe
		}
		return nil, fmt.Errorf("%w (%s)", err, aside)
	}
	return m, nil
}

// writeCheckpoint updates one target's entry, re-reading the file first
// so another process's targets are kept. The file is join's own
// (filewrite.Owned): a symlink there is refused, never written through.
func writeCheckpoint(palace, target string, st TargetState) error {
	m, err := readCheckpoint(palace)
	if errors.Is(err, errLinked) {
		return err // neither copied aside nor replaced
	}
	if err != nil {
		// An unreadable file gives way to this target's entry (queue logs
		// that it could not be read): the join outboxes, not this file,
		// know what each target was sent. Its bytes are kept beside it.
		if err := keepAside(checkpointPath(palace)); err != nil {
			return err
		}
		m = map[string]TargetState{}
	}
	m[target] = st
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if _, err := filewrite.Write(checkpointPath(palace), append(b, '\n'), 0o600, filewrite.Owned()); err != nil {
		return fmt.Errorf("%s: %w", checkpointPath(palace), err)
	}
	return nil
}

// keepAside copies file to file.unreadable before it is replaced; a file
// that cannot even be read is not replaced.
func keepAside(file string) error {
	b, err := filewrite.ReadRegular(file, 16<<20)
	if err != nil {
		return fmt.Errorf("%s: not replaced: %w", file, err)
	}
	if _, err := filewrite.Write(file+".unreadable", b, 0o600, filewrite.Owned()); err != nil {
		return fmt.Errorf("%s: not replaced, its copy failed: %w", file, err)
	}
	return nil
}
