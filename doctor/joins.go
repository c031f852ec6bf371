package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// joinCheckpoint is what doctor reads of <palace>/edge/bootstrap.json,
// join's record of each primary it joined (join.TargetState; join imports
// doctor, so doctor reads the fields it needs itself).
type joinCheckpoint struct {
	State     string    `json:"state"`
	Outbox    string    `json:"outbox"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CheckJoins is join-interrupted (§4.4): a join that stopped before it
// settled (killed, the container stopped) leaves its target in_progress
// and its records in the join outbox, which only join sends. An
// unreadable bootstrap.json is join's to report: it names it when it runs.
func CheckJoins(opts Options, st State) []Finding {
	if st.Palace == "" {
		return nil
	}
	return UnfinishedJoins(st.Palace, opts.Now())
}

// UnfinishedJoins are join-interrupted's findings for palace (edge status
// prints them too).
func UnfinishedJoins(palace string, now time.Time) []Finding {
	file := filepath.Join(palace, "edge", "bootstrap.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil // no join yet (or join says why when it runs)
	}
	var m map[string]joinCheckpoint
	if json.Unmarshal(b, &m) != nil {
		return nil // join reports an unreadable file, with its fix, when it runs
	}
	targets := make([]string, 0, len(m))
	for t := range m {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	var out []Finding
	holder := joinRunning(palace)
	for _, t := range targets {
		cp := m[t]
		if cp.State != "in_progress" {
			continue
		}
		if holder != "" {
			out = append(out, Finding{ID: IDJoinInterrupted, Severity: Info, Section: "§4.4",
				Message: fmt.Sprintf("a join of this palace is running (%s); its target %s is in_progress in %s until it ends", holder, t, file),
				Fix:     "let it finish, then run this again: a join still in_progress then stopped before it finished"})
			continue
		}
		out = append(out, Finding{ID: IDJoinInterrupted, Severity: Warn, Section: "§4.4",
			Message: fmt.Sprintf("a join to %s stopped before it finished (%s: in_progress, %s): what it queued in %s reaches the primary only when join runs again", t, file, updatedAgo(cp.UpdatedAt, now), filepath.Join(palace, "edge", cp.Outbox)),
			Fix:     fmt.Sprintf("with MEMPALACE_REMOTE_URL=%s, `devbox-config join --resume` sends what it queued and reads nothing new (`devbox-config join` finishes it and also sends what was written here since); if that primary is gone for good, `devbox-config join` to the one that replaced it sends everything, then delete %s and the %q entry of %s", t, filepath.Join(palace, "edge", cp.Outbox), t, file)})
	}
	return out
}

// joinRunning names the process holding the palace's join lock (join's
// hold: "pid N to URL"), "" when none does. Asking takes the lock for an
// instant where nobody holds it: a join starting in that instant is
// refused as if another ran, and says so.
func joinRunning(palace string) string {
	file := filepath.Join(palace, "edge", "join.lock")
	if _, err := os.Stat(file); err != nil {
		return "" // no join has run here since the lock was made: none runs
	}
	f, err := outbox.HoldLock(file)
	if err == nil {
		f.Close() // free: no join runs; the instant's lock let go
		return ""
	}
	if !errors.Is(err, outbox.ErrLocked) {
		return "" // no lock to be had: a running join cannot be told from a stopped one
	}
	return JoinLockHolder(file)
}

// JoinLockHolder is what a held join lock's file says of its holder:
// "pid N to URL" as join writes it, "pid unknown" when it says nothing.
func JoinLockHolder(file string) string {
	b, err := os.ReadFile(file)
	if err != nil || strings.TrimSpace(string(b)) == "" {
		return "pid unknown"
	}
	pid, to, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if to == "" {
		return "pid " + pid
	}
	return "pid " + pid + " to " + to
}

// updatedAgo says when a join's state was last written ("not dated" for a
// state without its time).
func updatedAgo(at, now time.Time) string {
	if at.IsZero() {
		return "not dated"
	}
	return "last updated " + now.Sub(at).Round(time.Second).String() + " ago"
}
