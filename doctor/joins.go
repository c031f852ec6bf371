package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// joinCheckpoint is what doctor reads of <palace>/edge/bootstrap.json,
// join's record of each primary it joined (join.TargetState; join imports
// doctor, so doctor reads the fields it needs itself).
type joinCheckpoint struct {
	State     string `json:"state"`
	Outbox    string `json:"outbox"`
	UpdatedAt string `json:"updated_at"` // read as text: a bad time does not hide the rest
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
	if errors.Is(err, os.ErrNotExist) {
		return nil // no join yet
	}
	var m map[string]joinCheckpoint
	if err == nil {
		err = (confpos.JSON{}).DecodeJSON(file, b, &m) // keys as join reads them: exactly
	}
	if err != nil {
		// A join may have stopped half-way with records queued: that is
		// not to be hidden because its state cannot be read.
		return []Finding{{ID: IDJoinInterrupted, Severity: Warn, Section: "§4.4",
			Message: fmt.Sprintf("%s, join's record of each primary it joined, cannot be read (%v): whether a join stopped half-way, with records queued in a join outbox in %s, is not known", file, err, filepath.Dir(file)),
			Fix:     "with MEMPALACE_REMOTE_URL set to the primary, run `devbox-config join`: it keeps the file's bytes in bootstrap.json.unreadable, writes a new one, and sends what the primary lacks, a stopped join's queued records included"}}
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
func updatedAgo(updated string, now time.Time) string {
	at, err := time.Parse(time.RFC3339Nano, updated)
	switch {
	case updated == "" || err != nil || at.IsZero():
		return "not dated"
	case at.After(now):
		return "last updated " + at.UTC().Format(time.RFC3339) + ", ahead of this clock"
	}
	return "last updated " + now.Sub(at).Round(time.Second).String() + " ago"
}
