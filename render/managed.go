package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/merge"
)

// load reads and parses a config in the record's format. A strict JSON
// file is refused where JSON.parse would refuse it, a commented one where
// JSON.parse would after its comments are stripped; errors name the file,
// line and column.
func load(sys System, rec harness.Record, path string) (loaded, error) {
	real, data, perm, err := readFile(sys, path)
	if err != nil {
		return loaded{}, errors.New(readError(path, err))
	}
	if len(bytes.TrimSpace(data)) > 0 {
		noBOM, enc := bytes.TrimPrefix(data, []byte(utf8BOM)), wide(data)
		switch {
		case enc != "":
			err = notUTF8(path, enc)
		case rec.NoBOM && len(noBOM) < len(data):
			err = bomRefused(path, rec.Title)
		case rec.Format == harness.JSON:
			err = strictJSON(path, noBOM)
		case rec.Format == harness.CommentedJSON:
			err = commentedJSON(path, noBOM)
		}
		if err != nil {
			return loaded{}, placed(rec.Format, path, data, err, "nothing written")
		}
	}
	doc, err := parse(rec, data)
	if err != nil {
		return loaded{}, placed(rec.Format, path, data, err, "nothing written")
	}
	return loaded{real: real, data: data, perm: perm, doc: doc}, nil
}

// Entry is rec's MemPalace entry in the config at path as standard JSON,
// read as render reads it (nil: no file, or no entry there). doctor reads
// the harness configs through it.
func Entry(rec harness.Record, path string) ([]byte, error) {
	f, err := load(OS{}, rec, path)
	if err != nil || f.data == nil {
		return nil, err
	}
	return f.doc.Get(rec.Pointer()...)
}

// recordPerm is the record's mode: it can hold text from the config (the
// "was" of an insert, comments included), so it is its owner's only.
const recordPerm fs.FileMode = 0o600

// managed describes one env-authoritative subtree.
type managed struct {
	rec     harness.Record
	file    string   // the config to edit
	pointer []string // the managed subtree
	desired []byte   // nil: nothing must be registered
	mode    string
	creates bool // create the file if it does not exist
	// noServer: solitary, and mempalace-mcp is neither on render's PATH
	// nor in ~/.local/bin (LocalLookPath). No entry is added where there
	// is none (R5); one render wrote is removed (a stdio one could not
	// start); any other stays exactly as it is.
	noServer bool
	// named: --target names the target, so an entry noServer keeps from
	// being added is a skip the user sees (--strict fails), not unchanged.
	named bool
}

// plan applies the decision table to one managed subtree: decide reads
// what the decision needs and makes it, describe turns it into the changes.
func (m managed) plan(opts Options, r Result, f loaded) Result {
	r.File, r.real = m.file, f.real
	if f.data == nil && !m.creates {
		r.Action = ActionNotPresent
		return r
	}
	if m.noServer {
		// R5: no file, or no entry to keep, and none to add: nothing is
		// written, not even the record (a deletion it remembers stays one).
		none := f.data == nil
		if !none {
			has, err := f.doc.Has(m.pointer...)
			none = err == nil && !has
		}
		switch {
		case none && m.named:
			return skipped(r, "%s", refusal(m.file, "no local mempalace entry was written: "+ladder.LocalServer+" is not on PATH nor in ~/.local/bin, so it could not start",
				"pip install mempalace, or put "+ladder.LocalServer+" on render's PATH; then render again"))
		case none:
			r.Action = "unchanged"
			return r
		}
		m.desired = nil
	}
	d, err := m.decide(opts, f)
	r.Warnings = append(r.Warnings, d.warnings...)
	if err != nil {
		return skipped(r, "%v", err)
	}
	return d.narrowRecord(m.settle(opts, r, f, d))
}

// settle turns decision d into the target's result and changes.
func (m managed) settle(opts Options, r Result, f loaded, d decision) Result {
	if m.mode == string(ladder.Solitary) && d.action == merge.KeepEdit && !d.hasRec {
		// R1: no variables, and an entry render never wrote: the user's,
		// left alone, unrecorded (a .proposed an older render left goes).
		r.Action = "unchanged"
		if d.oldProposed != nil {
			r.Changes = append(r.Changes, m.proposedChange(d.oldProposed, nil, 0))
		}
		return r
	}
	if m.noServer {
		if d.action != merge.Remove {
			r.Action = "unchanged" // edited after render wrote it: it stays
			return r
		}
		who := "render wrote"
		if !d.hasRec { // adopted: the old generator's shape, documented as render's to replace
			who = "in the shape render and the image's generator write"
		}
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: removed the mempalace entry %s: %s is not on PATH nor in ~/.local/bin, so a local stdio entry could not start (to get it back: pip install mempalace, or put %s on render's PATH; then render again)", m.file, who, ladder.LocalServer, ladder.LocalServer))
	}
	r.Action = string(d.action)
	return m.describe(r, f, d, opts.Now().UTC())
}

// decision is what decide found and decided for one managed subtree.
type decision struct {
	action merge.Action
	// state is the record file as read (empty if it was unreadable) and
	// stateBytes its bytes; rec is this target's record in it, hasRec
	// whether that records a value render wrote (not only a pending one).
	state       fingerprint.State
	stateBytes  []byte
	statePath   string
	statePerm   fs.FileMode // the record's mode as read
	rec         fingerprint.Record
	hasRec      bool
	oldProposed []byte // the .proposed sidecar as read (nil: none)
	warnings    []string
	// expanded: the live entry is render's with its references expanded
	// by the harness's own save (unexpand), decided on as render's.
	expanded *expansion
}

// decide reads the record and the .proposed sidecar and decides, from the
// live subtree, the desired one and the record, what happens to the
// subtree (merge.Decide). An error skips the target.
func (m managed) decide(opts Options, f loaded) (decision, error) {
	var d decision
	if dup := f.doc.Duplicates(m.pointer...); dup != nil {
		return d, &confpos.Error{File: m.file, Line: dup.Line, Col: dup.Column, What: fmt.Sprintf("%q is named twice; nothing written", dup.Path),
			Fix: "keep one, merging the two by hand; then run render again"}
	}
	if err := m.indirect(f); err != nil {
		return d, err
	}
	live, err := f.doc.Get(m.pointer...)
	if err != nil {
		return d, placed(m.rec.Format, m.file, f.data, err, "nothing written")
	}
	d.statePath = filepath.Join(filepath.Dir(m.file), fingerprint.StateFile)
	if d.stateBytes, d.statePerm, err = readOwn(opts.Sys, d.statePath); err != nil {
		return d, err
	}
	if d.state, err = fingerprint.ParseState(d.stateBytes); err != nil {
		d.statePerm = 0 // rewritten only with what render decides
		if opts.Reclaim {
			d.warnings = append(d.warnings, fmt.Sprintf("%s is unreadable (%v); --reclaim sets the mempalace entry in %s to what the environment says and writes a new record", d.statePath, err, m.file))
		} else {
			d.warnings = append(d.warnings, fmt.Sprintf("%s is unreadable (%v); treating every managed entry as possibly edited, so the mempalace entry in %s stays as it is whatever the environment says (fix: %s)", d.statePath, err, m.file, UnreadableRecordFix(d.statePath, []string{m.rec.Name})))
		}
		d.state, _ = fingerprint.ParseState(nil)
		d.stateBytes = []byte{}
	}
	if d.oldProposed, _, err = readOwn(opts.Sys, m.file+".proposed"); err != nil {
		return d, err
	}
	liveFP, err := fingerprint.Of(live)
	if err != nil {
		return d, fmt.Errorf("%s: %v", m.file, err)
	}
	d.rec, d.hasRec = d.state.Targets[m.rec.Name]
	recFP := ""
	if d.hasRec {
		recFP = d.rec.Ours(liveFP)
	}
	if recFP == "" {
		// No record of a value (perhaps only a pending one that was never
		// written): as if there were no record.
		d.hasRec = false
		if m.rec.Adopts != nil && m.rec.Adopts(live) {
			recFP = liveFP
		}
	}
	if recFP != "" && recFP != liveFP {
		live = d.unexpand(m.rec, live, recFP)
	}
	if d.action, err = merge.Decide(merge.Input{Live: live, Desired: m.desired, Record: recFP, Reclaim: opts.Reclaim}); err != nil {
		return d, fmt.Errorf("%s: %v", m.file, err)
	}
	d.settleExpanded(m)
	return d, nil
}

// indirect refuses an entry a YAML document reaches through an alias or
// a merge key, which render neither edits nor reads as the entry.
func (m managed) indirect(f loaded) error {
	in, ok := f.doc.(interface {
		Indirect(path ...string) *confpos.Error
	})
	if !ok {
		return nil
	}
	e := in.Indirect(m.pointer...)
	if e == nil {
		return nil
	}
	name := m.pointer[len(m.pointer)-1]
	return &confpos.Error{File: m.file, Line: e.Line, Col: e.Col,
		What: fmt.Sprintf("the %s entry comes through a YAML alias or merge key here (*name, <<:), which render neither edits nor reads as the entry; nothing written", name),
		Fix:  fmt.Sprintf("write the %s entry out in full under %s, without an alias or <<:, so render sees it (render then keeps yours and proposes its own beside it); then run render again", name, strings.Join(m.pointer[:len(m.pointer)-1], "."))}
}

// unexpand is live, or, when the harness saved the entry render recorded
// (recFP, the fingerprint merge.Decide compares with) with its references
// expanded, that entry with them back (d.expanded). Only recFP counts: a
// match on another recorded value would be decided on as the user's edit
// while the warning said it was rewritten (review32 R6).
func (d *decision) unexpand(rec harness.Record, live []byte, recFP string) []byte {
	x, ok := unexpand(rec, ladder.Mode(d.rec.Mode), live, func(entry []byte) bool {
		fp, err := fingerprint.Of(entry)
		return err == nil && fp == recFP
	})
	if !ok {
		return live
	}
	d.expanded = &x
	return x.entry
}

// settleExpanded: an entry the harness saved expanded is rewritten even
// when the environment's value is the one recorded (the references are
// back only in the file render writes), with the warning that says so.
func (d *decision) settleExpanded(m managed) {
	if d.expanded == nil {
		return
	}
	if d.action == merge.Unchanged {
		d.action = merge.Replace
	}
	d.warnings = append(d.warnings, d.expanded.warning(m.file, m.rec.Title, d.action == merge.Remove))
}

// UnreadableRecordFix is the way out of an unreadable record (render's
// warning, doctor's render-record): render keeps every entry it manages
// beside it as a user's edit, so one it wrote stays after the variables
// are gone.
func UnreadableRecordFix(record string, targets []string) string {
	if len(targets) == 0 {
		return fmt.Sprintf("no config render manages is beside it: `rm %s`", record)
	}
	return fmt.Sprintf("`devbox-config render --reclaim --target %s` sets the mempalace entry to what render writes now (with no MEMPALACE_* variables: a local mempalace-mcp entry, or none when mempalace-mcp is not installed), keeps yours in a .bak and writes a new record; or fix the entry by hand (delete it to have none), then `rm %s`", strings.Join(targets, ","), record)
}

// describe turns a decision into the changes it needs: the config, the
// .proposed sidecar and the record, as bytes before and after.
func (m managed) describe(r Result, f loaded, d decision, now time.Time) Result {
	edited, err := m.rendition(d.action, f, d.rec)
	var pe *confpos.Error
	switch {
	case errors.As(err, &pe) && pe.Line > 0:
		return skipped(r, "%v", placed(m.rec.Format, m.file, f.data, err, "nothing written"))
	case err != nil:
		return skipped(r, "%s: %v", m.file, err)
	}
	if d.action == merge.KeepEdit || d.action == merge.KeepDeleted {
		return m.describeKept(r, f, d, edited)
	}
	return m.describeWritten(r, f, d, edited, now)
}

// rendition is the file with the managed subtree set to the environment's
// value (for the file, or for the .proposed sidecar). It is built only
// when needed: the common start, where nothing changes, parses every file
// once and edits none.
func (m managed) rendition(action merge.Action, f loaded, rec fingerprint.Record) ([]byte, error) {
	switch action {
	case merge.Unchanged:
		return f.data, nil
	case merge.KeepDeleted:
		return nil, nil
	}
	return m.edit(f.doc, f.data, rec)
}

// before is what an insert into the existing file f changes besides the
// entry, for removing it to undo (the record's Created and Was): the map
// it creates, and the text of the empty map it goes into (a JSON object,
// or a YAML key's line).
func (m managed) before(f loaded) (created, was string) {
	if f.data == nil {
		return "", "" // a file render creates stays, with its empty map
	}
	parent := m.pointer[:len(m.pointer)-1]
	for i := 1; i < len(m.pointer); i++ {
		if has, err := f.doc.Has(m.pointer[:i]...); err == nil && !has {
			created, parent = "/"+strings.Join(m.pointer[:i], "/"), m.pointer[:i-1]
			break
		}
	}
	if e, ok := f.doc.(emptyText); ok {
		was, _ = e.EmptyText(parent...)
	}
	return created, was
}

// emptyText is a document that can give an empty map or list the text it
// had before an insert (JSON(C) and YAML; TOML's insert changes no other
// text).
type emptyText interface {
	EmptyText(path ...string) (string, bool)
	RestoreEmpty(text string, path ...string) (bool, error)
}

// undo removes what the insert the record describes added besides the
// entry, once the entry is gone: the maps it created, when they are left
// empty, and the empty object's own text.
func (m managed) undo(doc document, rec fingerprint.Record) error {
	parent := m.pointer[:len(m.pointer)-1]
	if rec.Created != "" {
		depth := strings.Count(rec.Created, "/")
		for i := len(m.pointer) - 1; i >= depth && i > 0; i-- {
			v, err := doc.Get(m.pointer[:i]...)
			if err != nil || v == nil || !emptyCollection(v) {
				break
			}
			if _, err := doc.Delete(m.pointer[:i]...); err != nil {
				return err
			}
			parent = m.pointer[:i-1]
		}
	}
	if e, ok := doc.(emptyText); ok && rec.Was != "" {
		_, err := e.RestoreEmpty(rec.Was, parent...)
		return err
	}
	return nil
}

// emptyCollection: v is {} or [].
func emptyCollection(v []byte) bool {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return false
	}
	switch c := x.(type) {
	case map[string]any:
		return len(c) == 0
	case []any:
		return len(c) == 0
	}
	return false
}

// describeWritten: the environment's value goes into the file (insert,
// replace, remove, or unchanged), a stale .proposed goes, and the record
// names what was written.
func (m managed) describeWritten(r Result, f loaded, d decision, edited []byte, now time.Time) Result {
	switch {
	case f.data == nil:
		r.Action = ActionCreate
	case d.action == merge.Unchanged && !d.hasRec && m.desired != nil:
		r.Action = ActionAdopted
	}
	newRecord := fingerprint.Record{File: filepath.Base(m.file), Pointer: "/" + strings.Join(m.pointer, "/"), Mode: m.mode, WrittenAt: now}
	newRecord.Fingerprint, _ = fingerprint.Of(m.desired)
	newRecord.Inserted = d.hasRec && d.rec.Inserted
	if d.hasRec {
		newRecord.Created, newRecord.Was = d.rec.Created, d.rec.Was
	}
	if d.action == merge.Insert {
		newRecord.Inserted = m.mode != string(ladder.Solitary)
		newRecord.Created, newRecord.Was = m.before(f)
	}
	if !bytes.Equal(edited, f.data) {
		// A file a harness's save put a secret in gets no backup: the
		// secret would stay in it, and the user's text is all in the new
		// file (only render's entry changes).
		secret := d.expanded != nil && len(d.expanded.secrets) > 0
		c := Change{Path: m.file, Real: f.real, Old: f.data, New: edited, Perm: f.perm, Backup: !secret, format: m.rec.Format, ours: ours(m.desired), secret: secret}
		if d.action != merge.Unchanged {
			// The managed value changes: record it as pending first.
			c.PendingState, c.StatePath = d.pending(m.rec.Name, newRecord).Marshal(), d.statePath
			c.StateBefore = d.state.Marshal()
		}
		r.Changes = append(r.Changes, c)
	}
	if d.oldProposed != nil {
		r.Changes = append(r.Changes, m.proposedChange(d.oldProposed, nil, 0))
	}
	// The user deleted the entry render wrote and nothing is registered
	// now (an opt-out): the record keeps what render wrote, so the entry
	// stays deleted at the next opt-in too.
	userDeleted := d.action == merge.Unchanged && m.desired == nil && d.hasRec && d.rec.Ours(fingerprint.Absent) != fingerprint.Absent
	if (!d.hasRec || !d.rec.Same(newRecord)) && !userDeleted {
		d.state.Targets[m.rec.Name] = newRecord
		r.Changes = append(r.Changes, d.recordChange(d.state.Marshal()))
	}
	return r
}

// describeKept: the user's value stays, and the file with it; an edit
// gets the environment's value in the .proposed sidecar, a deletion none.
func (m managed) describeKept(r Result, f loaded, d decision, edited []byte) Result {
	switch {
	case d.action == merge.KeepEdit:
		r.ProposedFile = m.file + ".proposed"
		r.unrecorded = !d.hasRec
		if !bytes.Equal(d.oldProposed, edited) {
			r.Changes = append(r.Changes, m.proposedChange(d.oldProposed, edited, f.perm))
		}
	case d.oldProposed != nil:
		r.Changes = append(r.Changes, m.proposedChange(d.oldProposed, nil, 0))
	}
	return r
}

// proposedChange writes (or, with new nil, removes) the .proposed sidecar.
func (m managed) proposedChange(old, new []byte, perm fs.FileMode) Change {
	p := m.file + ".proposed"
	return Change{Path: p, Real: p, Old: old, New: new, Perm: perm, own: true, format: m.rec.Format, ours: ours(m.desired)}
}

// narrowRecord adds to r a rewrite of the record as it is when it was
// read looser than recordPerm (left by a version before that mode) and r
// writes it in no other way: every run that reads it narrows it, not only
// one that changes it.
func (d decision) narrowRecord(r Result) Result {
	if r.Action == ActionSkipped || d.statePerm&^recordPerm == 0 {
		return r
	}
	for _, c := range r.Changes {
		if c.Real == d.statePath || c.StatePath == d.statePath {
			return r
		}
	}
	r.Changes = append(r.Changes, d.recordChange(d.stateBytes))
	return r
}

// recordChange writes the record (its mode recordPerm) as new.
func (d decision) recordChange(new []byte) Change {
	return Change{Path: d.statePath, Real: d.statePath, Old: d.stateBytes, New: new, Perm: recordPerm, own: true,
		format: harness.JSON, ours: recordOurs(d.stateBytes, new)}
}

// pending is the record naming newRecord as pending for target: written
// before the config, so a kill between the two leaves a record that
// recognises both the old file and the new one.
func (d decision) pending(target string, newRecord fingerprint.Record) fingerprint.State {
	pending := d.rec
	if !d.hasRec {
		pending = fingerprint.Record{File: newRecord.File, Pointer: newRecord.Pointer, Mode: newRecord.Mode}
	}
	pending.Pending, pending.WrittenAt = newRecord.Fingerprint, newRecord.WrittenAt
	pending.Created, pending.Was = newRecord.Created, newRecord.Was
	ps := fingerprint.State{Targets: maps.Clone(d.state.Targets)}
	ps.Targets[target] = pending
	return ps
}

// edit returns data (parsed as doc, which is left as it is) with the
// managed subtree set to the desired value (or removed). A file render
// creates (data nil) also gets the "$schema" the target wants; an existing
// one never does: every byte outside the entry stays.
func (m managed) edit(doc document, data []byte, rec fingerprint.Record) ([]byte, error) {
	doc, err := m.clone(doc, data)
	if err != nil {
		return nil, err
	}
	if m.desired == nil {
		if _, err := doc.Delete(m.pointer...); err != nil {
			return nil, err
		}
		if err := m.undo(doc, rec); err != nil {
			return nil, err
		}
	} else if err := doc.Set(m.desired, m.pointer...); err != nil {
		return nil, err
	}
	if jd, ok := doc.(*merge.Doc); ok && m.rec.Schema != "" && data == nil {
		return m.ensureSchema(jd, data)
	}
	return ensureFinalNewline(doc.Bytes(), data), nil
}

// clone is a copy of doc to edit: a JSONC document's tree is cloned, a
// TOML or YAML one parsed again from its bytes.
func (m managed) clone(doc document, data []byte) (document, error) {
	if jd, ok := doc.(*merge.Doc); ok {
		return jd.Clone(), nil
	}
	return parse(m.rec, doc.Bytes())
}

// ensureSchema adds "$schema" to doc (data as read) if it lacks one and
// returns the bytes.
func (m managed) ensureSchema(doc *merge.Doc, data []byte) ([]byte, error) {
	if ok, err := doc.Has("$schema"); err != nil || ok {
		return ensureFinalNewline(doc.Bytes(), data), err
	}
	v, _ := json.Marshal(m.rec.Schema)
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

// utf8BOM is a UTF-8 byte order mark: accepted and kept at the start of
// a JSON(C) config whose harness takes it (Claude Code reads
// ~/.claude.json with one), refused where it does not (Record.NoBOM).
const utf8BOM = "\xef\xbb\xbf"

// strictJSON validates standard JSON as pi's JSON.parse would, and
// places a syntax error (a *confpos.Error); file is the name the error
// and its fix give it.
func strictJSON(file string, data []byte) error {
	if enc := wide(data); enc != "" {
		return notUTF8(file, enc)
	}
	if json.Valid(data) || merge.StrictJSON(data) {
		return nil // the second: deeper than encoding/json goes
	}
	if bytes.HasPrefix(data, []byte(utf8BOM)) && json.Valid(data[len(utf8BOM):]) {
		return bomRefused(file, "JSON.parse")
	}
	return confpos.JSON{}.DecodeJSON(file, data, new(any))
}

// commentedJSON validates JSON with comments as a reader that strips them
// and then calls JSON.parse would (strip-json-comments: Gemini CLI, Qwen
// Code), which takes a last-line // comment without a final newline and
// any depth (merge.CommentedJSON: encoding/json stops at 10,000 levels).
func commentedJSON(file string, data []byte) error {
	if merge.CommentedJSON(data) {
		return nil
	}
	o := confpos.JSON{JSONC: true, NoTrailingCommas: true}
	err := o.DecodeJSON(file, data, new(any))
	if err != nil && o.DecodeJSON(file, append(bytes.Clone(data), '\n'), new(any)) == nil {
		return nil
	}
	return err
}

// bomRefused is the error for a file starting with a UTF-8 byte order
// mark that who refuses.
func bomRefused(file, who string) error {
	return &confpos.Error{File: file, Line: 1, Col: 1, What: "it starts with a UTF-8 byte order mark, which " + who + " refuses",
		Fix: fmt.Sprintf("save it without one, e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' %s", file)}
}

// wide names the encoding of data when it is UTF-16 or UTF-32 (what
// Windows calls "Unicode": PowerShell's Out-File and > write it), with its
// byte order mark, or without one where the first character, ASCII in any
// config, has NUL bytes beside it; "" for anything else (a file of NUL
// bytes alone is no text at all).
func wide(data []byte) string {
	b := append(bytes.Clone(data[:min(len(data), 4)]), 1, 1, 1, 1) // no index out of range
	switch {
	case b[0] == 0xff && b[1] == 0xfe && b[2] == 0 && b[3] == 0:
		return "UTF-32 (byte order mark FF FE 00 00)"
	case b[0] == 0 && b[1] == 0 && b[2] == 0xfe && b[3] == 0xff:
		return "UTF-32 (byte order mark 00 00 FE FF)"
	case b[0] == 0xff && b[1] == 0xfe:
		return "UTF-16 (byte order mark FF FE)"
	case b[0] == 0xfe && b[1] == 0xff:
		return "UTF-16 (byte order mark FE FF)"
	case b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] != 0:
		return "UTF-32BE"
	case b[0] != 0 && b[1] == 0 && b[2] == 0 && b[3] == 0:
		return "UTF-32LE"
	case b[0] == 0 && b[1] != 0:
		return "UTF-16BE"
	case b[0] != 0 && b[1] == 0:
		return "UTF-16LE"
	}
	return ""
}

// notUTF8 is the error for a file in the wide encoding enc (wide's), which
// render (and the harnesses, which read UTF-8) cannot read.
func notUTF8(file, enc string) error {
	from, _, _ := strings.Cut(enc, " ")
	return &confpos.Error{File: file, Line: 1, Col: 1, What: "the file is " + enc + ", not UTF-8",
		Fix: "save it as UTF-8 (iconv -f " + from + " -t UTF-8 converts it)"}
}

// placed is a config's syntax error in the form of every config mistake,
// FILE:LINE:COLUMN: what; how (fix: …; then run render again): at the
// place the parser gave, or, for JSON(C), where confpos finds it.
func placed(format harness.Format, file string, data []byte, err error, how string) error {
	var pe *confpos.Error
	if !errors.As(err, &pe) || pe.Line == 0 {
		if format == harness.JSON || format == harness.JSONC || format == harness.CommentedJSON {
			if perr := (confpos.JSON{JSONC: format != harness.JSON}).DecodeJSON(file, bytes.TrimPrefix(data, []byte(utf8BOM)), new(any)); perr != nil {
				err = perr // else the JSON is sound and err says what is wrong
			}
		}
		if !errors.As(err, &pe) || pe.Line == 0 {
			return fmt.Errorf("%s: %v; %s (fix: %s; then run render again)", file, err, how, parseFix(format))
		}
	}
	p := *pe
	p.File, p.What = file, pe.What+"; "+how
	if p.Fix == "" {
		p.Fix = parseFix(format)
	}
	p.Fix += "; then run render again"
	return &p
}

// parseFix is the usual fix for a config in format that does not parse,
// where nothing more precise is known.
func parseFix(format harness.Format) string {
	switch format {
	case harness.TOML:
		return "correct the TOML there: a missing quote, = or ], or a key or [table] written twice, is the usual cause"
	case harness.YAML:
		return "correct the YAML there: indentation, a tab, or a value with ': ' or '#' that needs quotes is the usual cause"
	}
	return "correct the JSON there: a missing or extra comma, quote or bracket is the usual cause; the file must hold one object, {...}"
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

// fileExists reports whether path names something that is not a
// directory (a link to one included, a dangling link not).
func fileExists(sys System, path string) bool {
	real, err := sys.EvalSymlinks(path)
	if err != nil {
		return false
	}
	fi, err := sys.Lstat(real)
	return err == nil && !fi.IsDir()
}
