package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/render"
)

// IDEntryCommand: a harness config's stdio MemPalace entry runs a command
// that cannot be started. IDEntryLocalBin: it runs mempalace-mcp by name,
// found only in ~/.local/bin, which is not on this PATH. IDConfigShadowed:
// a harness config the harness does not read, because another hides it.
const (
	IDEntryCommand   = "entry-command"
	IDEntryLocalBin  = "entry-local-bin"
	IDConfigShadowed = "config-shadowed"
)

// CheckEntryCommand is entry-command (§4.1): every harness config a record
// names is read as render reads it, and a stdio MemPalace entry that runs
// mempalace-mcp or devbox-config must find it. render removes an entry it
// wrote when mempalace-mcp is nowhere, but leaves one it did not write (an
// old generator's, a user's), and an edge entry outlives the devbox-config
// it names: the harness then starts without MemPalace's tools and says
// nothing. A config that does not parse is render's to report.
func CheckEntryCommand(opts Options) []Finding {
	env := harness.Env{Home: opts.Home, HomeFromFlag: opts.HomeFromFlag, Lookup: opts.Env}
	var out []Finding
	for _, rec := range harness.All() {
		if len(rec.Key) == 0 {
			continue // a settings merge (pi): no entry
		}
		for _, name := range rec.Location.Names() {
			path := filepath.Join(rec.Location.DirPath(env), name)
			entry, err := render.Entry(rec, path)
			if err != nil || entry == nil {
				continue
			}
			cmd, _ := harness.Command(entry)
			base := filepath.Base(cmd)
			if base != ladder.LocalServer && base != "devbox-config" {
				continue // a remote entry, or someone else's server
			}
			switch why := opts.cannotStart(cmd); {
			case why != "":
				out = append(out, entryCommandFinding(rec, path, cmd, why))
			case !strings.ContainsRune(cmd, '/') && !opts.onPath(cmd):
				out = append(out, localBinFinding(rec, path, cmd))
			}
		}
	}
	return out
}

// cannotStart says why a harness cannot start cmd ("" : it can): an
// absolute path must be an executable file; a bare name must be on PATH,
// or in pipx's ~/.local/bin, where render keeps an entry for a login
// shell's PATH to find (render.InHomeBin: render's own rule). A relative path depends on the harness's working
// directory and is not judged.
func (o Options) cannotStart(cmd string) string {
	switch {
	case filepath.IsAbs(cmd):
		return notExecutable(cmd)
	case strings.ContainsRune(cmd, '/'):
		return ""
	}
	if o.onPath(cmd) || render.InHomeBin(render.OS{}, o.Home, cmd) {
		return ""
	}
	return "is not on PATH nor in ~/.local/bin"
}

func (o Options) onPath(cmd string) bool {
	_, err := o.LookPath(cmd)
	return err == nil
}

// localBinFinding: R1's entry is the bare name the images wrote, which
// render keeps (and adds) when the program is in pipx's ~/.local/bin, for a
// login shell's PATH to find; a harness started with doctor's PATH cannot.
func localBinFinding(rec harness.Record, path, cmd string) Finding {
	return Finding{ID: IDEntryLocalBin, Severity: Warn, Section: "§4.1",
		Message: fmt.Sprintf("%s: the MemPalace entry %s runs %s by name, which is only in ~/.local/bin (pipx's), not on this PATH: %s started with this PATH cannot start it and runs without MemPalace's tools, saying nothing (a login shell that adds ~/.local/bin can)", path, strings.Join(rec.Pointer(), "."), cmd, rec.Title),
		Fix:     "put ~/.local/bin on the PATH the harnesses start with (`pipx ensurepath`, the image's or the shell profile's PATH); render writes the bare name, as the images always did"}
}

// CheckConfigShadowed is config-shadowed (§4.1): a harness that reads only
// the first of its files that exists (harness.Location.FirstOnly: Amp's
// settings.json, else settings.jsonc) ignores the others, and every server
// and setting in them, saying nothing; an older render created Amp's
// settings.json beside a user's settings.jsonc.
func CheckConfigShadowed(opts Options) []Finding {
	env := harness.Env{Home: opts.Home, HomeFromFlag: opts.HomeFromFlag, Lookup: opts.Env}
	var out []Finding
	for _, rec := range harness.All() {
		if !rec.Location.FirstOnly {
			continue
		}
		read := ""
		for _, name := range rec.Location.Write {
			path := filepath.Join(rec.Location.DirPath(env), name)
			if _, err := os.Stat(path); err != nil {
				continue // a dangling link is none to the harness either
			}
			if read == "" {
				read = path
				continue
			}
			out = append(out, Finding{ID: IDConfigShadowed, Severity: Warn, Section: "§4.1",
				Message: fmt.Sprintf("%s is not read: %s reads only %s while it exists, so every server and setting in %[1]s is ignored", path, rec.Title, read),
				Fix:     fmt.Sprintf("move what you need from %s into %s and remove it; or, if %[2]s holds nothing of yours (an older render created it for its mempalace entry), remove %[2]s and run `devbox-config render`", path, read)})
		}
	}
	return out
}

// notExecutable says why path is not a program ("" : it is).
func notExecutable(path string) string {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return "does not exist"
	case !fi.Mode().IsRegular():
		return "is not a file"
	case fi.Mode().Perm()&0o111 == 0:
		return "is not executable"
	}
	return ""
}

func entryCommandFinding(rec harness.Record, path, cmd, why string) Finding {
	fix := fmt.Sprintf("install MemPalace (pip install mempalace, or pipx install mempalace) so %[1]s is on PATH, then run `devbox-config render` again; or, if this devbox is meant to run without MemPalace, run `devbox-config render` (it removes an entry it wrote) and delete the entry by hand if it stays (render leaves one it did not write)", ladder.LocalServer)
	if filepath.Base(cmd) == "devbox-config" {
		fix = "put devbox-config on PATH (scripts/build /usr/local/bin/devbox-config), then run `devbox-config render` again: it rewrites the entry it wrote; one it did not write, point at the binary by hand"
	}
	if filepath.IsAbs(cmd) {
		fix += fmt.Sprintf("; or edit the entry so its command is where the program is now (a bare %s is looked up on PATH)", filepath.Base(cmd))
	}
	return Finding{ID: IDEntryCommand, Severity: Error, Section: "§4.1",
		Message: fmt.Sprintf("%s: the MemPalace entry %s runs %s, which %s: %s cannot start its MemPalace server and runs without MemPalace's tools, saying nothing", path, strings.Join(rec.Pointer(), "."), cmd, why, rec.Title),
		Fix:     fix}
}

// IDEntryUnused: a harness config holds the MemPalace entry, but a setting
// beside it, or a file the harness merges under it, makes the harness not
// use it as written.
const IDEntryUnused = "entry-unused"

// CheckEntryUnused is entry-unused (§4.1): every harness config a record
// names is read as render reads it and judged by render's own evaluator
// (render.Ignored, the record's Ignores and MergedFrom) for the rung the
// environment asks for: a Claude Code local-scope entry or disabled
// project, a Gemini CLI allow- or exclude-list, a pi-mcp-adapter shared
// file leaking fields; and a project config in or above opts.Dir that
// replaces the entry (projectEntries). The harness shows the entry
// blocked, disabled or replaced, and render's "updated" alone does not say
// so.
func CheckEntryUnused(opts Options, st State) []Finding {
	env := harness.Env{Home: opts.Home, HomeFromFlag: opts.HomeFromFlag, Lookup: opts.Env}
	out := projectEntries(opts)
	for _, rec := range harness.All() {
		if len(rec.Ignores) == 0 && rec.MergedFrom == "" {
			continue
		}
		for _, name := range rec.Location.Names() {
			for _, u := range render.Ignored(rec, opts.Home, filepath.Join(rec.Location.DirPath(env), name), st.Settings.Mode) {
				out = append(out, Finding{ID: IDEntryUnused, Severity: Warn, Section: "§4.1", Message: u.Message, Fix: u.Fix})
			}
		}
	}
	return out
}
