package render

import (
	"errors"
	"fmt"
	"github.com/joakimp/devbox-config/redact"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/shellword"
)

// AllTargets is every target (every harness record), in the order they run.
var AllTargets = harness.Names()

// Actions besides merge.Action's.
const (
	ActionCreate     = "create"      // a new file with the entry (or pi template)
	ActionAdopted    = "adopted"     // an entry an older generator wrote, equal to ours: recorded as ours
	ActionMerged     = "merged"      // pi settings: missing template keys added
	ActionSkipped    = "skipped"     // a file could not be read or parsed: nothing written
	ActionDisabled   = "disabled"    // PI_SETTINGS_MERGE=0
	ActionNotPresent = "not-present" // the harness is not set up here; nothing to do
	// ActionNotOptedIn: solitary, and render never managed this harness
	// (R1: nothing registers MemPalace where nothing did before).
	ActionNotOptedIn = "not-opted-in"
)

// Options configure a run.
type Options struct {
	// Home is the home directory. XDG_CONFIG_HOME and PI_CODING_AGENT_DIR
	// from Env are honoured only when HomeFromFlag is false.
	Home         string
	HomeFromFlag bool
	// Env is the environment (the ladder's variables and the XDG ones).
	Env ladder.Lookup
	// LookPath finds mempalace-mcp.
	LookPath ladder.LookPath
	// Names are the environment's variable names (an --env-file's keys, or
	// the process's): a misspelt MEMPALACE_* one is warned of.
	Names []string
	// Targets to render; empty means all. A target named here explicitly is
	// created even if the harness has no files yet.
	Targets []string
	// Reclaim lets the environment win over a user's edit or deletion.
	Reclaim bool
	// PiTemplate replaces the embedded pi settings template.
	PiTemplate []byte
	// PiTemplateName names PiTemplate in messages.
	PiTemplateName string
	Sys            System
	Now            func() time.Time
	Log            *slog.Logger
}

// Change is one file write or removal that a plan wants.
type Change struct {
	// Path is where the user sees the file; Real is where the bytes go
	// (Path with symlinks followed).
	Path, Real string
	// Old is the current content (nil: the file does not exist); New is the
	// content to write (nil: remove the file).
	Old, New []byte
	Perm     fs.FileMode
	// Backup keeps a timestamped copy of Old before writing.
	Backup bool
	// PendingState, when set, is written to StatePath before this change:
	// a record that names the rendition about to be written as pending,
	// so a kill between this write and the record's confirmation leaves a
	// record that recognises both the old and the new file.
	PendingState []byte
	StatePath    string
	// StateBefore is the record without the pending value, written back
	// when the file changed while render ran and nothing was written.
	StateBefore []byte
	// own: the file is render's own (a .proposed, the record), written
	// with System.WriteOwn, never through a link.
	own bool
	// secret: Old held a secret a harness's save put there (unexpand), so
	// the file is made readable by its owner only (and gets no backup).
	secret bool
	// format is the file's, and ours the values render writes in it: Diff
	// prints those, and hides every other value of the file (mask).
	format harness.Format
	ours   map[string]bool
}

// Result is the outcome for one target.
type Result struct {
	Target       string   `json:"target"`
	File         string   `json:"file"`
	Mode         string   `json:"mode"`
	Action       string   `json:"action"`
	ProposedFile string   `json:"proposed_file"`
	Warnings     []string `json:"warnings"`
	// Changes are the writes this target needs (already done unless the run
	// was a dry run).
	Changes []Change `json:"-"`
	// Added lists the pi settings keys a merge added.
	Added []string `json:"added,omitempty"`
	// real is File with symlinks followed, where its temp files and
	// backups live.
	real string
	// unrecorded: the entry kept (kept-user-edit) is one render has no
	// record of writing: the user's own, not an edit of render's.
	unrecorded bool
}

// Kept reports whether the target did not get the environment's value:
// skipped, or a user's edit or deletion was kept. --strict fails on it.
func (r Result) Kept() bool {
	switch r.Action {
	case ActionSkipped, "kept-user-edit", "kept-user-deletion":
		return true
	}
	return false
}

// Run plans every target and, unless dryRun, applies the plans. The error
// is for usage problems only; every file problem is a skipped target with a
// warning, because container start must never fail because of render.
func Run(opts Options, dryRun bool) ([]Result, []ladder.Warning, error) {
	opts = opts.withDefaults()
	targets, err := selectTargets(opts.Targets)
	if err != nil {
		return nil, nil, err
	}
	settings, lw := ladder.Resolve(opts.Env, LocalLookPath(opts.Sys, opts.Home, opts.LookPath))
	lw = append(lw, ladder.Misspelt(opts.Names)...)
	for _, w := range lw {
		opts.Log.Warn(w.String())
	}
	dw := opts.harnessEnv().Warnings() // logged once, not per target
	for _, w := range dw {
		opts.Log.Warn(w.String())
	}
	global := append(lw, dw...)
	token := ladder.TokenSource(opts.Env)()
	var results []Result
	for _, t := range targets {
		r := runTarget(opts, settings, t, dryRun)
		r.Warnings = hideToken(r.Warnings, token)
		for _, w := range global {
			r.Warnings = append(r.Warnings, w.String())
		}
		results = append(results, r)
	}
	return results, global, nil
}

// hideToken is warnings, never nil, with token (MEMPALACE_REMOTE_TOKEN's
// value) redacted wherever it is, as Diff redacts it, and wherever a word
// holds a piece of it (redact.Pieces): a config's text a
// warning quotes (a literal that does not parse) may hold it. Not the
// credential rule: a parse error's "basic strings" is English (attack115
// F3). The ladder's warnings never hold it.
func hideToken(warnings []string, token string) []string {
	out := make([]string, 0, len(warnings))
	for _, w := range warnings {
		if len(token) >= redact.MinTokenInText {
			w = redact.Token(w, token)
		}
		w = redact.Pieces(w, token) // a shorter token too, as a word holding it (review35 R3)
		out = append(out, w)
	}
	return out
}

func runTarget(opts Options, s ladder.Settings, t string, dryRun bool) Result {
	explicit := len(opts.Targets) > 0
	var reads *readLog
	plan := func() Result {
		o := opts
		reads = &readLog{System: opts.Sys}
		o.Sys = reads
		return planTarget(o, s, t, explicit)
	}
	r := plan()
	rec, _ := harness.ByName(t)
	if rec.Lock != "" && len(r.Changes) > 0 {
		if msg := lockInTheWay(opts.Sys, r.File, rec.Lock); msg != "" { // the dry run says it too: doctor's render-refuses
			return skipped(r, "%s", msg)
		}
	}
	if dryRun {
		return r
	}
	cleanTemps(opts, r)
	if len(r.Changes) == 0 {
		logResult(opts.Log, r)
		return r
	}
	dir := filepath.Dir(r.Changes[0].Path)
	if err := opts.Sys.MkdirAll(dir, 0o755); err != nil {
		return skipped(r, "cannot create %s: %v", dir, err)
	}
	unlock, err := opts.Sys.LockDir(dir)
	if err != nil {
		return skipped(r, "%v", err)
	}
	defer unlock()
	if rec.Lock != "" { // the harness writes its file under <file>.lock
		unlockOwner, err := opts.Sys.LockOwner(r.File, rec.Lock)
		if err != nil {
			return skipped(r, "%v", err)
		}
		defer unlockOwner()
	}
	// Decide again under the lock if another container (or pi) wrote
	// anything the first look read between it and the lock.
	if !reads.unchanged() {
		r = plan()
	}
	if err := apply(opts, r.Changes); err != nil {
		return skipped(r, "%v", err)
	}
	logResult(opts.Log, r)
	return r
}

func planTarget(opts Options, s ladder.Settings, t string, explicit bool) Result {
	rec, _ := harness.ByName(t)
	if rec.Settings != nil {
		return leaveAlone(opts.Sys, planSettings(opts, s, rec, explicit))
	}
	return leaveAlone(opts.Sys, planEntry(opts, s, rec, explicit))
}

// leaveAlone skips a target whose config would be rewritten although the
// user made it read-only (no write bit at all: they asked for the file to
// stay as it is, and root could write it anyway), or although render's
// user could not keep its owner (a rename would make another user's file
// its own). Decided here, at plan time, nothing at all is written for the
// target: no backup, no record, no .proposed.
func leaveAlone(sys System, r Result) Result {
	for _, c := range r.Changes {
		if !c.Backup || c.Old == nil || c.New == nil {
			continue
		}
		if c.Perm&0o222 == 0 {
			return skipped(r, "%s", refusal(c.Path, fmt.Sprintf("it is read-only (mode %04o), so it is left alone", c.Perm),
				"chmod u+w "+shellword.Quote(c.Path)+" to let render update it"))
		}
		var nw *filewrite.NotWritableError
		if errors.As(sys.CheckOwner(c.Real), &nw) {
			return skipped(r, "%s belongs to %s (group %d, mode %04o), and render runs as uid %d, which cannot keep that owner when it writes the file, so it is left alone (fix: as root, chown it to uid %d and a group of that user to let render update it)",
				c.Path, filewrite.OwnerName(nw.UID), nw.GID, nw.Mode, nw.User, nw.User)
		}
	}
	return r
}

// staleTemp is how old a temp file must be before render takes it for one
// a killed run left behind (a concurrent writer's is younger).
const staleTemp = time.Minute

// cleanTemps removes the stale temp files of render's own writes for this
// target: of the config (beside its real file), its backups, its .proposed
// sidecar and the state record. Nothing else is touched; failures only
// leave the files for the next start.
func cleanTemps(opts Options, r Result) {
	if r.File == "" {
		return
	}
	dirs := map[string]func(base string) bool{}
	base := filepath.Base(r.File)
	dirs[filepath.Dir(r.File)] = func(b string) bool {
		return b == base || b == base+".proposed" || b == fingerprint.StateFile || isBackupOf(base, b)
	}
	if r.real != "" && r.real != r.File {
		realBase := filepath.Base(r.real)
		prev := dirs[filepath.Dir(r.real)]
		dirs[filepath.Dir(r.real)] = func(b string) bool {
			return b == realBase || isBackupOf(realBase, b) || (prev != nil && prev(b))
		}
	}
	for dir, owned := range dirs {
		entries, err := opts.Sys.ReadDir(dir)
		if err != nil {
			continue
		}
		done := map[string]bool{}
		for _, e := range entries {
			b, ok := filewrite.TempTarget(e.Name())
			if !ok || !owned(b) || done[b] {
				continue
			}
			done[b] = true
			if err := opts.Sys.CleanStale(dir, b, staleTemp); err != nil {
				opts.Log.Debug("cannot remove a stale temp file", "dir", dir, "err", err)
			}
		}
	}
}

// changedWhileRendering is apply's refusal of c, whose file changed while
// render ran: the record no longer names the value never written as
// pending; the .bak made first stays (a copy of the file as read).
func changedWhileRendering(opts Options, c Change) error {
	what := "it changed while render ran (an editor or the harness saved it), so nothing was written to it"
	if c.Backup && c.Old != nil {
		what += "; the copy of it as render read it, made first (.bak.<time>), stays"
	}
	if c.PendingState != nil {
		if err := opts.Sys.WriteOwn(c.StatePath, c.StateBefore, recordPerm); err != nil {
			what += fmt.Sprintf("; its record %s still names the value as about to be written (%v), which the next run sets right", c.StatePath, err)
		}
	}
	return errors.New(refusal(c.Path, what, "run render again"))
}

// apply writes the changes in order: configs first, then sidecars and the
// state record, so a record never claims a write that did not happen.
func apply(opts Options, changes []Change) error {
	now := opts.Now()
	for _, c := range changes {
		if c.New == nil {
			if err := opts.Sys.Remove(c.Real); err != nil {
				return fmt.Errorf("remove %s: %w", c.Path, err)
			}
			continue
		}
		if c.PendingState != nil {
			if err := opts.Sys.WriteOwn(c.StatePath, c.PendingState, recordPerm); err != nil {
				return fmt.Errorf("write %s: %w", c.StatePath, err)
			}
		}
		if c.own {
			if err := opts.Sys.WriteOwn(c.Real, c.New, copyPerm(opts.Env, c.Perm, c.New)); err != nil {
				return fmt.Errorf("write %s: %w", c.Path, err)
			}
			continue
		}
		if c.Backup && c.Old != nil {
			if err := writeBackup(opts.Sys, c.Real, c.Old, copyPerm(opts.Env, c.Perm, c.Old), now); err != nil {
				return err
			}
		}
		res, err := opts.Sys.WriteFile(c.Real, c.Old, c.New, c.Perm)
		var changed *filewrite.ChangedError
		if errors.As(err, &changed) {
			return changedWhileRendering(opts, c)
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", c.Path, err)
		}
		if c.secret {
			if err := opts.Sys.Narrow(c.Real, ownerOnly); err != nil {
				return fmt.Errorf("make %s readable by its owner only: %w", c.Path, err)
			}
		}
		if res.InPlace {
			msg := "wrote the file in place: it is bind-mounted or hard-linked, so it cannot be replaced atomically"
			if c.Backup && c.Old != nil {
				msg += " (a .bak copy was kept first)"
			}
			opts.Log.Warn(msg, "file", c.Path)
		}
	}
	return nil
}

// ownerOnly keeps a mode's owner bits: a file that holds a secret.
const ownerOnly fs.FileMode = 0o700

// copyPerm is the mode of render's copy of a config (a .bak, a .proposed,
// the record), data, at perm: its owner's only where data holds
// MEMPALACE_REMOTE_TOKEN's value literally.
func copyPerm(env ladder.Lookup, perm fs.FileMode, data []byte) fs.FileMode {
	if ladder.HoldsToken(env, data) {
		return perm & 0o600
	}
	return perm
}

// KeptWhy is what a user's edit (or deletion) of the entry that render
// keeps is, and the fix; "" for any other action.
func (r Result) KeptWhy() (what, fix string) {
	switch r.Action {
	case "kept-user-edit":
		what = "kept your edit of the managed entry"
		if r.unrecorded {
			what = "the file already has a " + harness.Server + " entry render did not write (it has no record of one), so it is kept as it is"
		}
		return what, "merge it by hand, or `devbox-config render --reclaim --target " + r.Target + "` writes the environment's value and keeps yours in a .bak"
	case "kept-user-deletion":
		return "you deleted the managed entry, so it is not recreated", "`devbox-config render --reclaim --target " + r.Target + "` restores it"
	}
	return "", ""
}

func logResult(log *slog.Logger, r Result) {
	switch what, fix := r.KeptWhy(); r.Action {
	case "kept-user-edit":
		log.Warn(what+"; the environment's value is in the .proposed file (fix: "+fix+")",
			"target", r.Target, "file", r.File, "proposed", r.ProposedFile)
	case "kept-user-deletion":
		log.Warn(what+" (fix: "+fix+")", "target", r.Target, "file", r.File)
	case ActionSkipped, ActionDisabled, ActionNotPresent, ActionNotOptedIn, "unchanged":
	default:
		log.Info("updated", "target", r.Target, "file", r.File, "action", r.Action, "mode", r.Mode)
	}
}

func skipped(r Result, format string, args ...any) Result {
	r.Action = ActionSkipped
	r.Changes = nil
	r.ProposedFile = ""
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
	return r
}

func selectTargets(names []string) ([]string, error) {
	if len(names) == 0 {
		return AllTargets, nil
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if !slices.Contains(AllTargets, n) {
			return nil, fmt.Errorf("unknown target %q (render --help lists the targets under --target)", n)
		}
		if !seen[n] {
			out = append(out, n)
			seen[n] = true
		}
	}
	return out, nil
}

func (o Options) withDefaults() Options {
	if o.Sys == nil {
		o.Sys = OS{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Env == nil {
		o.Env = func(string) (string, bool) { return "", false }
	}
	return o
}

// refusal is a file render leaves alone, in the form of every config
// mistake (confpos.Error): FILE: what (fix: how).
func refusal(file, what, fix string) string {
	return (&confpos.Error{File: file, What: what, Fix: fix}).Error()
}

// readError is the warning for a file that could not be read (a special
// file, a link that cannot be followed): render leaves it alone.
func readError(path string, err error) string {
	what, fix := unreadable(path, err)
	return refusal(path, what, fix)
}

// unreadable is why path cannot be read, in plain words, and the fix.
func unreadable(path string, err error) (what, fix string) {
	var nr *filewrite.NotRegularError
	var bl *brokenLink
	q := shellword.Quote(path)
	switch {
	case errors.As(err, &nr) && nr.Real != "" && nr.Real != path:
		return fmt.Sprintf("it is a link to %s, a %s, not a regular file, so it is left alone", nr.Real, nr.Kind),
			"point the link at a regular file, or remove it to let render create one"
	case errors.As(err, &nr):
		return fmt.Sprintf("it is a %s, not a regular file, so it is left alone", nr.Kind),
			fmt.Sprintf("move it aside (mv %s %s.old) to let render write a regular file there", q, q)
	case errors.As(err, &bl) && errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("it is a link to %s, which does not exist (the volume it is on not mounted?), so it is left alone", bl.to),
			"mount the volume it is on, or point the link at a file that exists, or remove the link to let render create the file"
	case errors.As(err, &bl) && loops(err):
		return fmt.Sprintf("it is a link to %s that leads back to itself (a loop of links), so it is left alone", bl.to),
			"point the link at a regular file, or remove it to let render create one"
	case errors.Is(err, fs.ErrPermission):
		return "it is not readable by render's user (permission denied), so it is left alone",
			"let render's user read it, e.g. chmod u+r " + q
	}
	return fmt.Sprintf("it cannot be read (%v), so it is left alone", err), ""
}

// brokenLink is a symlink that cannot be followed; to is what it names.
type brokenLink struct {
	to  string
	err error
}

func (e *brokenLink) Error() string {
	return "a link to " + e.to + " that cannot be followed: " + e.err.Error()
}
func (e *brokenLink) Unwrap() error { return e.err }

// readFile reads a config, following symlinks. It returns the real path,
// the bytes (nil if the file does not exist) and the mode.
func readFile(sys System, path string) (real string, data []byte, perm fs.FileMode, err error) {
	fi, err := sys.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil, 0o644, nil
	}
	if err != nil {
		return path, nil, 0, err
	}
	real = path
	if fi.Mode()&fs.ModeSymlink != 0 {
		if real, err = sys.EvalSymlinks(path); err != nil {
			to, _ := sys.Readlink(path)
			return path, nil, 0, &brokenLink{to: to, err: err}
		}
	}
	data, err = sys.ReadFile(real)
	if err != nil {
		return real, nil, 0, err
	}
	if data == nil {
		data = []byte{}
	}
	if fi2, err := sys.Lstat(real); err == nil {
		perm = fi2.Mode().Perm()
	}
	return real, data, perm, nil
}

// readOwn reads one of render's own files (a .proposed, the record) and
// its mode: nil if it does not exist, and an error naming it if it is a symlink, which
// render never reads or writes through (the file it points to is not
// render's).
func readOwn(sys System, path string) ([]byte, fs.FileMode, error) {
	fi, err := sys.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, 0, fmt.Errorf("%s is a symbolic link: render writes its own files (.proposed, %s, backups) only as regular files, never through a link, so nothing is written for this target; remove the link and the next start writes a regular file", path, fingerprint.StateFile)
	}
	_, data, perm, err := readFile(sys, path)
	if err != nil {
		return nil, 0, errors.New(readError(path, err))
	}
	return data, perm, nil
}

// Diff returns a unified diff of the change, labelled with its path. It
// shows the file's keys and structure, the values render writes, and of
// the user's values only variable references, numbers, booleans and null:
// every other value and every comment is hidden (mask), so it prints no
// secret the user's file holds; token (MEMPALACE_REMOTE_TOKEN's value) is
// redacted wherever it is.
func (c Change) Diff(token string) string {
	from, to := "a"+c.Path, "b"+c.Path
	if c.Old == nil {
		from = "/dev/null"
	}
	if c.New == nil {
		to = "/dev/null"
	}
	ud := difflib.UnifiedDiff{A: diffLines(mask(c.format, c.Old, c.ours)), B: diffLines(mask(c.format, c.New, c.ours)), FromFile: from, ToFile: to, Context: 3}
	s, err := difflib.GetUnifiedDiffString(ud)
	if err != nil {
		return fmt.Sprintf("(no diff: %v)\n", err)
	}
	if token = strings.TrimSpace(token); len(token) >= redact.MinTokenInText {
		s = strings.ReplaceAll(s, token, redacted)
	}
	return s
}

// diffLines splits b into lines that each end in a newline; a last line
// without one is marked as diff(1) does.
func diffLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		return lines[:len(lines)-1]
	}
	lines[len(lines)-1] += "\n\\ No newline at end of file\n"
	return lines
}
