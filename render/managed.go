package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/merge"
	"github.com/joakimp/devbox-config/templates"
)

// opencodeSchema is the "$schema" opencode inserts into any config that
// lacks it (rewriting the file; older builds dropped comments and wrote
// expanded secrets doing so). Writing it ourselves keeps opencode's hands
// off the file.
const opencodeSchema = "https://opencode.ai/config.json"

// opencodeFiles are the global config files opencode reads, lowest
// precedence first (config.json < opencode.json < opencode.jsonc).
var opencodeFiles = []string{"config.json", "opencode.json", "opencode.jsonc"}

// loaded is a config read and parsed once per plan.
type loaded struct {
	real string      // the path with symlinks followed
	data []byte      // nil: the file does not exist
	perm fs.FileMode // the file's mode (0644 for a new file)
	doc  document    // data parsed; an empty document for a new file
}

// load reads and parses a config. strict refuses what JSON.parse refuses.
// focus names the top-level keys render may edit (see
// merge.ParseDocFocused).
func load(sys System, path string, strict bool, focus ...string) (loaded, error) {
	real, data, perm, err := readFile(sys, path)
	if err != nil {
		return loaded{}, errors.New(readError(path, err))
	}
	if strict && len(bytes.TrimSpace(data)) > 0 {
		if err := strictJSON(data); err != nil {
			return loaded{}, fmt.Errorf("%s is not valid JSON, nothing written: %v", path, err)
		}
	}
	doc, err := merge.ParseDocFocused(data, focus...)
	if err != nil {
		return loaded{}, fmt.Errorf("%s does not parse, nothing written: %v", path, err)
	}
	return loaded{real: real, data: data, perm: perm, doc: doc}, nil
}

// managed describes one env-authoritative subtree.
type managed struct {
	target  string
	harness templates.Harness
	file    string   // the config to edit
	pointer []string // the managed subtree
	desired []byte   // nil: nothing must be registered
	mode    string
	schema  bool // make sure "$schema" is present (opencode)
	strict  bool // the harness reads strict JSON: refuse comments
	creates bool // create the file if it does not exist
	toml    bool // the file is TOML (Codex), spliced by merge.TOMLDoc
}

func planOpencode(opts Options, s ladder.Settings) Result {
	dir := opencodeDir(opts)
	r := Result{Target: TargetOpencode, Mode: string(s.Mode)}
	desired, err := templates.Entry(templates.Opencode, s)
	if err != nil {
		return skipped(r, "%v", err)
	}
	// The file that already holds mcp.mempalace, else opencode.jsonc, else
	// opencode.json, else a new opencode.jsonc. Any config that does not
	// parse stops the target: opencode would not start with it either, and
	// we cannot tell what it holds.
	if fi, err := opts.Sys.Lstat(dir); err == nil && !fi.IsDir() && !dirExists(opts.Sys, dir) {
		// A file (or a link to one) where opencode's directory should be:
		// say so, rather than "not a directory" about a file inside it.
		r.File = dir
		return skipped(r, "%s is a file, not a directory, so opencode's config cannot be there; nothing written (move it aside)", dir)
	}
	var holders, existing []string
	files := map[string]loaded{}
	for _, name := range opencodeFiles {
		path := filepath.Join(dir, name)
		f, err := load(opts.Sys, path, false, "mcp", "$schema")
		if err != nil {
			r.File = path
			return skipped(r, "%v", err)
		}
		files[name] = f
		if f.data == nil {
			continue
		}
		existing = append(existing, name)
		if ok, _ := f.doc.Has("mcp", "mempalace"); ok {
			holders = append(holders, name)
		}
	}
	file := "opencode.jsonc"
	switch {
	case len(holders) > 0:
		file = holders[len(holders)-1]
		for _, other := range holders[:len(holders)-1] {
			r.Warnings = append(r.Warnings, fmt.Sprintf(
				"%s also defines mcp.mempalace; opencode deep-merges it under %s, so stale keys from it may leak into the entry",
				filepath.Join(dir, other), file))
		}
	case contains(existing, "opencode.jsonc"):
	case contains(existing, "opencode.json"):
		file = "opencode.json"
	}
	m := managed{
		target: TargetOpencode, harness: templates.Opencode, file: filepath.Join(dir, file), pointer: []string{"mcp", "mempalace"},
		desired: desired, mode: string(s.Mode), schema: true, creates: true,
	}
	return m.plan(opts, r, files[file])
}

func planPiMCP(opts Options, s ladder.Settings, explicit bool) Result {
	r := Result{Target: TargetPiMCP, Mode: string(s.Mode)}
	desired, err := templates.Entry(templates.PiMCP, s)
	if err != nil {
		return skipped(r, "%v", err)
	}
	m := managed{
		target: TargetPiMCP, harness: templates.PiMCP, file: filepath.Join(piAgentDir(opts), "mcp.json"), pointer: []string{"mcpServers", "mempalace"},
		desired: desired, mode: string(s.Mode), strict: true, creates: explicit,
	}
	f, err := load(opts.Sys, m.file, true, m.pointer[0])
	if err != nil {
		return skipped(r, "%v", err)
	}
	return m.plan(opts, r, f)
}

// plan applies the decision table to one managed subtree.
func (m managed) plan(opts Options, r Result, f loaded) Result {
	r.File, r.real = m.file, f.real
	real, data, perm, doc := f.real, f.data, f.perm, f.doc
	if data == nil && !m.creates {
		r.Action = ActionNotPresent
		return r
	}
	if data == nil && m.desired == nil {
		// R5 on a fresh HOME: nothing to register, so no file at all.
		r.Action = "unchanged"
		return r
	}
	if dup := doc.Duplicates(m.pointer...); dup != nil {
		return skipped(r, "%s: %v; edit it by hand so there is one, nothing written", m.file, dup)
	}
	live, err := doc.Get(m.pointer...)
	if err != nil {
		return skipped(r, "%s: %v", m.file, err)
	}

	stateDir := filepath.Dir(m.file)
	statePath := filepath.Join(stateDir, fingerprint.StateFile)
	stateBytes, err := readOwn(opts.Sys, statePath)
	if err != nil {
		return skipped(r, "%v", err)
	}
	state, err := fingerprint.ParseState(stateBytes)
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s is unreadable (%v); treating every managed entry as possibly edited", statePath, err))
		state, _ = fingerprint.ParseState(nil)
		stateBytes = []byte{}
	}
	rec, hasRec := state.Targets[m.target]
	liveFP, err := fingerprint.Of(live)
	if err != nil {
		return skipped(r, "%s: %v", m.file, err)
	}
	recFP := ""
	if hasRec {
		recFP = rec.Ours(liveFP)
	}
	if recFP == "" {
		// No record of a value (perhaps only a pending one that was never
		// written): as if there were no record.
		hasRec = false
		if templates.FromOldGenerator(m.harness, live) {
			recFP = liveFP
		}
	}

	action, err := merge.Decide(merge.Input{Live: live, Desired: m.desired, Record: recFP, Reclaim: opts.Reclaim})
	if err != nil {
		return skipped(r, "%s: %v", m.file, err)
	}
	r.Action = string(action)

	// edited: the managed subtree set to the environment's value (plus
	// "$schema"), for the file or for the .proposed sidecar. kept: the file
	// as it is, plus "$schema". Each is built only when needed: the common
	// start, where nothing changes, parses every file once and edits none.
	var edited, kept []byte
	switch action {
	case merge.Unchanged, merge.KeepDeleted:
		kept = data
	default:
		if edited, err = m.edit(doc, data); err != nil {
			return skipped(r, "%s: %v", m.file, err)
		}
		kept = data
	}
	if jd, ok := doc.(*merge.Doc); ok && m.schema && data != nil {
		if has, _ := doc.Has("$schema"); !has {
			if kept, err = m.ensureSchema(jd.Clone(), data); err != nil {
				return skipped(r, "%s: %v", m.file, err)
			}
		}
	}
	if action == merge.Unchanged {
		edited = kept
	}
	proposed := m.file + ".proposed"
	oldProposed, err := readOwn(opts.Sys, proposed)
	if err != nil {
		return skipped(r, "%v", err)
	}
	newRecord := fingerprint.Record{File: filepath.Base(m.file), Pointer: "/" + strings.Join(m.pointer, "/"), Mode: m.mode, WrittenAt: opts.Now().UTC()}
	newRecord.Fingerprint, _ = fingerprint.Of(m.desired)

	switch action {
	case merge.Unchanged, merge.Insert, merge.Replace, merge.Remove:
		switch {
		case data == nil:
			r.Action = ActionCreate
		case action == merge.Unchanged && !hasRec && m.desired != nil:
			r.Action = ActionAdopted
		}
		if !bytes.Equal(edited, data) {
			c := Change{Path: m.file, Real: real, Old: data, New: edited, Perm: perm, Backup: true}
			if action != merge.Unchanged {
				// The managed value changes: record it as pending first.
				pending := rec
				if !hasRec {
					pending = fingerprint.Record{File: newRecord.File, Pointer: newRecord.Pointer, Mode: newRecord.Mode}
				}
				pending.Pending, pending.WrittenAt = newRecord.Fingerprint, newRecord.WrittenAt
				ps := fingerprint.State{Targets: map[string]fingerprint.Record{}}
				for k, v := range state.Targets {
					ps.Targets[k] = v
				}
				ps.Targets[m.target] = pending
				c.PendingState, c.StatePath = ps.Marshal(), statePath
			}
			r.Changes = append(r.Changes, c)
		}
		if oldProposed != nil {
			r.Changes = append(r.Changes, Change{Path: proposed, Real: proposed, Old: oldProposed, New: nil, own: true})
		}
		if !hasRec || !rec.Same(newRecord) {
			state.Targets[m.target] = newRecord
			r.Changes = append(r.Changes, Change{Path: statePath, Real: statePath, Old: stateBytes, New: state.Marshal(), Perm: 0o644, own: true})
		}
	case merge.KeepEdit, merge.KeepDeleted:
		// Keep the user's value. Only "$schema" may still be added: opencode
		// would add it itself, less carefully.
		if !bytes.Equal(kept, data) {
			r.Changes = append(r.Changes, Change{Path: m.file, Real: real, Old: data, New: kept, Perm: perm, Backup: true})
		}
		if action == merge.KeepEdit {
			r.ProposedFile = proposed
			if !bytes.Equal(oldProposed, edited) {
				r.Changes = append(r.Changes, Change{Path: proposed, Real: proposed, Old: oldProposed, New: edited, Perm: perm, own: true})
			}
		} else if oldProposed != nil {
			r.Changes = append(r.Changes, Change{Path: proposed, Real: proposed, Old: oldProposed, New: nil, own: true})
		}
	}
	return r
}

// edit returns data (parsed as doc, which is left as it is) with the
// managed subtree set to the desired value (or removed) and "$schema"
// present when the target wants it.
func (m managed) edit(doc document, data []byte) ([]byte, error) {
	doc, err := m.clone(doc, data)
	if err != nil {
		return nil, err
	}
	if m.desired == nil {
		if _, err := doc.Delete(m.pointer...); err != nil {
			return nil, err
		}
	} else if err := doc.Set(m.desired, m.pointer...); err != nil {
		return nil, err
	}
	if jd, ok := doc.(*merge.Doc); ok && m.schema {
		return m.ensureSchema(jd, data)
	}
	return ensureFinalNewline(doc.Bytes(), data), nil
}

// clone is a copy of doc to edit: a JSONC document's tree is cloned, a
// TOML one parsed again from data.
func (m managed) clone(doc document, data []byte) (document, error) {
	if jd, ok := doc.(*merge.Doc); ok {
		return jd.Clone(), nil
	}
	return m.parse(data)
}

// ensureSchema adds "$schema" to doc (data as read) if it lacks one and
// returns the bytes.
func (m managed) ensureSchema(doc *merge.Doc, data []byte) ([]byte, error) {
	if ok, err := doc.Has("$schema"); err != nil || ok {
		return ensureFinalNewline(doc.Bytes(), data), err
	}
	v, _ := json.Marshal(opencodeSchema)
	if err := doc.Set(v, "$schema"); err != nil {
		return nil, err
	}
	return ensureFinalNewline(doc.Bytes(), data), nil
}

// ensureFinalNewline ends a newly created file with a newline; an existing
// file keeps its own ending.
func ensureFinalNewline(out, orig []byte) []byte {
	if len(bytes.TrimSpace(orig)) == 0 && !bytes.HasSuffix(out, []byte("\n")) {
		return append(out, '\n')
	}
	return out
}

// strictJSON validates standard JSON and reports the line and column of a
// syntax error, as pi's JSON.parse would refuse it.
func strictJSON(data []byte) error {
	if json.Valid(data) {
		return nil
	}
	var v any
	err := json.Unmarshal(data, &v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := int(se.Offset) - 1 // Offset counts the offending byte
		if off > len(data) {
			off = len(data)
		}
		if off < 0 {
			off = 0
		}
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		col := off - bytes.LastIndexByte(data[:off], '\n')
		return fmt.Errorf("line %d, column %d: %v", line, col, se)
	}
	return err
}

func opencodeDir(opts Options) string {
	if !opts.HomeFromFlag {
		if x := opts.env("XDG_CONFIG_HOME"); x != "" {
			return filepath.Join(x, "opencode")
		}
	}
	return filepath.Join(opts.Home, ".config", "opencode")
}

func piAgentDir(opts Options) string {
	if !opts.HomeFromFlag {
		if d := opts.env("PI_CODING_AGENT_DIR"); d != "" {
			return d
		}
	}
	return filepath.Join(opts.Home, ".pi", "agent")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// dirExists reports whether a directory exists.
func dirExists(sys System, dir string) bool {
	fi, err := sys.Lstat(dir)
	if err != nil {
		return false
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if real, err := sys.EvalSymlinks(dir); err == nil {
			fi, err = sys.Lstat(real)
			if err != nil {
				return false
			}
		}
	}
	return fi.IsDir()
}
