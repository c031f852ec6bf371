package render

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/merge"
)

// planSettings ports pi-devbox's entrypoint merge: template first, live
// second, only missing keys filled, arrays as leaves, rewrite only when
// something was added, timestamped .bak first, PI_SETTINGS_MERGE=0 turns it
// off, invalid JSON on either side skips with a warning.
func planSettings(opts Options, s ladder.Settings, rec harness.Record, explicit bool) Result {
	dir := rec.Location.DirPath(opts.harnessEnv())
	file := filepath.Join(dir, rec.Location.Write[0])
	r := Result{Target: rec.Name, Mode: string(s.Mode), File: file}
	if !s.PiSettingsMerge {
		r.Action = ActionDisabled
		return r
	}
	tmpl, tmplName := opts.PiTemplate, opts.PiTemplateName
	if tmpl == nil {
		tmpl, tmplName = rec.Settings(), "the embedded pi settings template"
	}
	if err := strictJSON(tmplName, tmpl); err != nil {
		return skipped(r, "%v", placed(harness.JSON, tmplName, tmpl, err, "nothing written"))
	}
	if r, blocked := inTheWay(opts.Sys, r, rec, file, !explicit, dir); blocked {
		return r
	}
	real, data, perm, err := readFile(opts.Sys, file)
	if err != nil {
		return skipped(r, "%s", readError(file, err))
	}
	r.real = real
	if data == nil {
		// Only when the target is asked for by name (Scope FileExists):
		// a new file, even where pi is set up, would break R1's "no new
		// files but render's record".
		if !explicit {
			r.Action = ActionNotPresent
			return r
		}
		r.Action = ActionCreate
		r.Changes = []Change{{Path: file, Real: real, New: ensureFinalNewline(bytes.Clone(tmpl), nil), Perm: 0o644, ours: ours(rec.Settings())}}
		return r
	}
	if err := strictJSON(file, data); err != nil {
		return skipped(r, "%v", placed(harness.JSON, file, data, err, "pi would ignore it too, nothing written"))
	}
	doc, err := merge.ParseDoc(data)
	if err != nil {
		return skipped(r, "%s: %v", file, err)
	}
	added, err := merge.FillMissing(doc, tmpl)
	if err != nil {
		return skipped(r, "%s: %v", file, fmt.Errorf("merge with %s: %w", tmplName, err))
	}
	if len(added) == 0 {
		r.Action = "unchanged"
		return r
	}
	r.Action, r.Added = ActionMerged, added
	r.Changes = []Change{{Path: file, Real: real, Old: data, New: doc.Bytes(), Perm: perm, Backup: true, ours: ours(rec.Settings())}}
	return r
}
