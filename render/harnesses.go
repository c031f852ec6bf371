package render

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/merge"
	"github.com/joakimp/devbox-config/templates"
)

// Every harness is one record (package harness): its file, format, key
// path, entries and traps. The plan here reads the record; nothing in
// render changes per harness. A harness that is not set up is skipped
// silently unless --target names it.

// document is a parsed config in which one subtree can be read and
// replaced: merge.Doc for JSON and JSONC, merge.TOMLDoc for TOML,
// merge.YAMLDoc for YAML.
type document interface {
	Get(path ...string) ([]byte, error)
	Has(path ...string) (bool, error)
	Duplicates(path ...string) *merge.DuplicateError
	Set(value []byte, path ...string) error
	Delete(path ...string) (bool, error)
	Bytes() []byte
}

// parse parses a config in the record's format. focus names the top-level
// keys render may edit (see merge.ParseDocFocused).
func parse(rec harness.Record, data []byte) (document, error) {
	switch rec.Format {
	case harness.TOML:
		return merge.ParseTOML(data)
	case harness.YAML:
		return merge.ParseYAML(data, rec.ListKey)
	}
	return merge.ParseDocFocused(data, focus(rec)...)
}

// focus is the top-level keys render reads and edits in a JSON(C) file.
func focus(rec harness.Record) []string {
	f := []string{rec.Key[0]}
	if rec.Schema != "" {
		f = append(f, "$schema")
	}
	return f
}

func (o Options) harnessEnv() harness.Env {
	return harness.Env{Home: o.Home, HomeFromFlag: o.HomeFromFlag, Lookup: o.Env}
}

// planEntry plans one harness's managed entry.
func planEntry(opts Options, s ladder.Settings, rec harness.Record, explicit bool) Result {
	env := opts.harnessEnv()
	loc := rec.Location
	r := Result{Target: rec.Name, Mode: string(s.Mode)}
	// Set up here: its directory, or its config file where that lives
	// outside it (Claude Code's ~/.claude.json without ~/.claude/).
	present := dirExists(opts.Sys, loc.MarkerPath(env)) || fileExists(opts.Sys, loc.Path(env))
	prior, had := priorRecord(opts, rec)
	// R1: with no MEMPALACE_* variables a container behaves exactly as
	// before, and before, nothing registered MemPalace with an opt-in
	// harness; the images did with opencode and pi-mcp-adapter, whose
	// solitary entry is the one they wrote.
	unregistered := rec.Scope == harness.OptIn && s.Mode == ladder.Solitary
	if unregistered && !explicit && !had {
		// Once render has managed one (an opt-in, then back to solitary),
		// the entry follows the environment back (R6). Nothing is written,
		// so nothing in its way is warned of (attack88 F7).
		// The file named is the one choose would edit (Amp's
		// settings.jsonc without a settings.json: attack121 F2).
		dir := loc.DirPath(env)
		name := first(loc.Write, func(n string) bool { return fileExists(opts.Sys, filepath.Join(dir, n)) })
		r.File, r.Action = filepath.Join(dir, name), ActionNotOptedIn
		if !present {
			r.Action = ActionNotPresent
		}
		return r
	}
	ref, _ := rec.TokenRef()
	desired, err := templates.Entry(rec.Name, rec.Entries.For(s.Mode), s, ref)
	if err != nil {
		return skipped(r, "%v", err)
	}
	if unregistered && prior.Inserted {
		// Opting out (a start, or --target naming it): the user had no
		// entry before render inserted one while opted in, so it goes, as
		// if they had never opted in (R1); opencode's and pi-mcp-adapter's
		// becomes the stdio one the images wrote.
		desired = nil
	}
	dir := loc.DirPath(env)
	creates := explicit || rec.Scope == harness.Always || (rec.Scope == harness.OptIn && present)
	if r, blocked := inTheWay(opts.Sys, r, rec, loc.Path(env), !creates, dir, loc.MarkerPath(env)); blocked {
		return r
	}
	name, f, warnings, err := choose(opts, rec, dir)
	r.Warnings = append(r.Warnings, warnings...)
	if err != nil {
		r.File = filepath.Join(dir, name)
		return skipped(r, "%v", err)
	}
	if f.data == nil && rec.Skeleton != "" {
		if f.doc, err = parse(rec, []byte(rec.Skeleton)); err != nil {
			return skipped(r, "the new file's skeleton does not parse (please report): %v", err)
		}
	}
	m := managed{rec: rec, file: filepath.Join(dir, name), pointer: rec.Pointer(), desired: desired, mode: string(s.Mode), creates: creates, noServer: !s.Register(), named: explicit}
	r = m.plan(opts, r, f)
	return warnIgnored(opts, r, m, f.doc, s.Mode)
}

// warnIgnored adds to r a warning for each setting of the entry rec's
// file holds after this run (r.Action on m) that its harness ignores.
func warnIgnored(opts Options, r Result, m managed, doc document, mode ladder.Mode) Result {
	entry := m.desired
	switch r.Action {
	case ActionSkipped, ActionNotPresent:
		entry = nil
	case string(merge.KeepEdit), string(merge.KeepDeleted):
		entry, _ = doc.Get(m.rec.Pointer()...)
	}
	for _, u := range ignored(opts.Sys, opts.Home, m.rec, m.file, doc, entry, mode) {
		r.Warnings = append(r.Warnings, u.String())
	}
	return r
}

// inTheWay skips a target whose file's directory cannot exist: it, or a
// parent of it, is a file, a link to one, or a dangling link. It says
// what is in the way, as a warning with the fix, rather than "not a
// directory" about a file inside it. quiet: nothing names or creates the
// target and what is in the way is none of its own directories (one of
// own): the harness is not set up here, so it is not present, silently
// (~/.config a file says nothing for each harness below it).
func inTheWay(sys System, r Result, rec harness.Record, file string, quiet bool, own ...string) (Result, bool) {
	p, what, fix := blocker(sys, filepath.Dir(file))
	switch {
	case p == "":
		return r, false
	case quiet && !slices.Contains(own, p):
		r.File, r.Action = file, ActionNotPresent
		return r, true
	}
	r.File = p
	return skipped(r, "%s is %s, not a directory, so %s's config cannot be there; nothing written (fix: %s)", p, what, rec.Title, fix), true
}

// blocker is the nearest of dir and its parents that exists but is not a
// directory (nor a link to one), what it is and the fix; "" when nothing
// is in dir's way.
func blocker(sys System, dir string) (path, what, fix string) {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := sys.Lstat(p)
		switch {
		case err != nil && filepath.Dir(p) == p:
			return "", "", ""
		case err != nil:
			continue
		case dirExists(sys, p):
			return "", "", ""
		case fi.Mode()&fs.ModeSymlink == 0:
			return p, "a file", "move it aside"
		}
		what, err := linkKind(sys, p)
		switch {
		case err == nil:
			return p, what, "point it at a directory, or move it aside"
		case loops(err):
			return p, what, "remove the link, or point it at a directory"
		}
		return p, what, "create the directory it points to, or remove the link"
	}
}

// LocalLookPath is look, except that mempalace-mcp is also found in
// ~/.local/bin (InHomeBin): the ladder's "local server found" is one
// rule for adding a solitary entry and for keeping one (R1).
func LocalLookPath(sys System, home string, look ladder.LookPath) ladder.LookPath {
	return func(file string) (string, error) {
		p, err := look(file)
		if err != nil && file == ladder.LocalServer && InHomeBin(sys, home, file) {
			return filepath.Join(home, ".local", "bin", file), nil
		}
		return p, err
	}
}

// InHomeBin reports an executable cmd in home's ~/.local/bin (a symlink
// followed), where pipx puts mempalace-mcp: on the PATH of a login shell,
// perhaps not on render's. It is the one rule render (add or keep a stdio
// entry without it on PATH) and doctor (entry-command) share.
func InHomeBin(sys System, home, cmd string) bool {
	real, err := sys.EvalSymlinks(filepath.Join(home, ".local", "bin", cmd))
	if err != nil {
		return false
	}
	fi, err := sys.Lstat(real)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// choose reads every file the harness reads and picks the one to edit: the
// one that already holds the entry (the last, by precedence), else the
// first of Location.Write that exists, else a new Write[0]; for a
// FirstOnly harness, the first of Write that exists (the one it reads),
// else a new Write[0]. Any file that
// does not parse stops the target: the harness would not start with it
// either, and what it holds is unknown. On error name is the file at fault.
func choose(opts Options, rec harness.Record, dir string) (name string, f loaded, warnings []string, err error) {
	var holders []string
	files := map[string]loaded{}
	for _, n := range rec.Location.Names() {
		l, err := load(opts.Sys, rec, filepath.Join(dir, n))
		if err != nil {
			return n, loaded{}, nil, err
		}
		files[n] = l
		if l.data == nil {
			continue
		}
		if ok, _ := l.doc.Has(rec.Pointer()...); ok {
			holders = append(holders, n)
		}
	}
	name = rec.Location.Write[0]
	switch {
	case rec.Location.FirstOnly:
		name = first(rec.Location.Write, loadedIn(files))
		for _, other := range rec.Location.Write {
			if other != name && files[other].data != nil {
				warnings = append(warnings, fmt.Sprintf(
					"%s is not read: %s reads only %s while it exists (fix: move what you need from it into %[3]s and remove it)",
					filepath.Join(dir, other), rec.Title, filepath.Join(dir, name)))
			}
		}
	case len(holders) > 0:
		name = holders[len(holders)-1]
		for _, other := range holders[:len(holders)-1] {
			warnings = append(warnings, fmt.Sprintf(
				"%s also defines %s; %s deep-merges it under %s, so stale keys from it may leak into the entry",
				filepath.Join(dir, other), strings.Join(rec.Pointer(), "."), rec.Title, name))
		}
	default:
		name = first(rec.Location.Write, loadedIn(files))
	}
	if _, ok := files[name]; !ok { // a Write name the harness does not read
		if files[name], err = load(opts.Sys, rec, filepath.Join(dir, name)); err != nil {
			return name, loaded{}, warnings, err
		}
	}
	return name, files[name], warnings, nil
}

// first is the first of names that exists, else names[0]: the file
// choose edits where none holds the entry, and the one a not-opted-in
// target names.
func first(names []string, exists func(name string) bool) string {
	for _, n := range names {
		if exists(n) {
			return n
		}
	}
	return names[0]
}

// loadedIn is whether a file choose loaded exists.
func loadedIn(files map[string]loaded) func(string) bool {
	return func(n string) bool { return files[n].data != nil }
}

// priorRecord is this target's record beside its config, and whether
// there is one: render wrote its entry at some start.
func priorRecord(opts Options, rec harness.Record) (fingerprint.Record, bool) {
	_, b, _, err := readFile(opts.Sys, filepath.Join(rec.Location.DirPath(opts.harnessEnv()), fingerprint.StateFile))
	if err != nil || b == nil {
		return fingerprint.Record{}, false
	}
	st, err := fingerprint.ParseState(b)
	if err != nil {
		return fingerprint.Record{}, true // unreadable: plan as before and let it warn
	}
	r, ok := st.Targets[rec.Name]
	return r, ok
}

// loaded is a config read and parsed once per plan.
type loaded struct {
	real string      // the path with symlinks followed
	data []byte      // nil: the file does not exist
	perm fs.FileMode // the file's mode (0644 for a new file)
	doc  document    // data parsed; an empty document for a new file
}
