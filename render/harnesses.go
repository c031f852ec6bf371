package render

import (
	"fmt"
	"path/filepath"

	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/merge"
	"github.com/joakimp/devbox-config/templates"
)

// The harnesses after opencode and pi: Claude Code, Codex, Gemini CLI,
// Cursor and VS Code. Each is one managed subtree with the same fingerprint
// and decision table as opencode's; what differs is the file, its format,
// and when the harness counts as set up here. A harness that is not set up
// is skipped silently unless --target names it.

// document is a parsed config in which one subtree can be read and
// replaced: merge.Doc for JSON and JSONC, merge.TOMLDoc for Codex.
type document interface {
	Get(path ...string) ([]byte, error)
	Has(path ...string) (bool, error)
	Duplicates(path ...string) *merge.DuplicateError
	Set(value []byte, path ...string) error
	Delete(path ...string) (bool, error)
	Bytes() []byte
}

func (m managed) parse(data []byte) (document, error) {
	if m.toml {
		return merge.ParseTOML(data)
	}
	return merge.ParseDoc(data)
}

// harnessTarget describes one of these harnesses.
type harnessTarget struct {
	target  string
	harness templates.Harness
	file    func(Options) string
	// present says the harness is set up here (its directory exists).
	present func(Options) bool
	pointer []string
	strict  bool // the harness reads strict JSON
	toml    bool
}

var harnessTargets = map[string]harnessTarget{
	// Claude Code keeps user-scope servers in ~/.claude.json (the file it
	// also rewrites itself, under ~/.claude.json.lock; runTarget takes that
	// lock). JSON.parse: a comment makes it refuse the file.
	TargetClaudeCode: {
		target: TargetClaudeCode, harness: templates.ClaudeCode, pointer: []string{"mcpServers", "mempalace"}, strict: true,
		file: func(o Options) string { return filepath.Join(claudeDir(o), ".claude.json") },
		present: func(o Options) bool {
			if d := o.env("CLAUDE_CONFIG_DIR"); d != "" && !o.HomeFromFlag {
				return dirExists(o.Sys, d)
			}
			return dirExists(o.Sys, filepath.Join(o.Home, ".claude"))
		},
	},
	// Codex: $CODEX_HOME/config.toml (default ~/.codex), never rewritten by
	// Codex itself.
	TargetCodex: {
		target: TargetCodex, harness: templates.Codex, pointer: []string{"mcp_servers", "mempalace"}, toml: true,
		file:    func(o Options) string { return filepath.Join(codexDir(o), "config.toml") },
		present: func(o Options) bool { return dirExists(o.Sys, codexDir(o)) },
	},
	// Gemini CLI: ~/.gemini/settings.json ($GEMINI_CLI_HOME replaces the
	// home directory), read with comments stripped.
	TargetGemini: {
		target: TargetGemini, harness: templates.Gemini, pointer: []string{"mcpServers", "mempalace"},
		file:    func(o Options) string { return filepath.Join(geminiDir(o), "settings.json") },
		present: func(o Options) bool { return dirExists(o.Sys, geminiDir(o)) },
	},
	// Cursor: ~/.cursor/mcp.json, merged with a project's .cursor/mcp.json.
	TargetCursor: {
		target: TargetCursor, harness: templates.Cursor, pointer: []string{"mcpServers", "mempalace"},
		file:    func(o Options) string { return filepath.Join(o.Home, ".cursor", "mcp.json") },
		present: func(o Options) bool { return dirExists(o.Sys, filepath.Join(o.Home, ".cursor")) },
	},
	// VS Code: the user profile's mcp.json ($XDG_CONFIG_HOME/Code/User),
	// key "servers".
	TargetVSCode: {
		target: TargetVSCode, harness: templates.VSCode, pointer: []string{"servers", "mempalace"},
		file:    func(o Options) string { return filepath.Join(vscodeUserDir(o), "mcp.json") },
		present: func(o Options) bool { return dirExists(o.Sys, vscodeUserDir(o)) },
	},
}

func planHarness(opts Options, s ladder.Settings, h harnessTarget, explicit bool) Result {
	r := Result{Target: h.target, Mode: string(s.Mode)}
	if s.Mode == ladder.Solitary && !explicit && h.present(opts) && !managedBefore(opts, h) {
		// R1: with no MEMPALACE_* variables a container behaves exactly as
		// before, and before, nothing registered MemPalace with these
		// harnesses. Once render has managed one (an opt-in, then back to
		// solitary), the entry follows the environment back (R6).
		r.File, r.Action = h.file(opts), ActionNotOptedIn
		return r
	}
	desired, err := templates.Entry(h.harness, s)
	if err != nil {
		return skipped(r, "%v", err)
	}
	m := managed{
		target: h.target, harness: h.harness, file: h.file(opts), pointer: h.pointer,
		desired: desired, mode: string(s.Mode), strict: h.strict, toml: h.toml,
		creates: explicit || h.present(opts),
	}
	r.File = m.file
	var f loaded
	if h.toml {
		f, err = loadTOML(opts.Sys, m.file)
	} else {
		f, err = load(opts.Sys, m.file, h.strict)
	}
	if err != nil {
		return skipped(r, "%v", err)
	}
	return m.plan(opts, r, f)
}

// loadTOML reads and parses a TOML config; errors name file, line and
// column.
func loadTOML(sys System, path string) (loaded, error) {
	real, data, perm, err := readFile(sys, path)
	if err != nil {
		return loaded{}, fmt.Errorf("cannot read %s: %v", path, err)
	}
	doc, err := merge.ParseTOML(data)
	if err != nil {
		return loaded{}, fmt.Errorf("%s does not parse, nothing written: %v", path, err)
	}
	return loaded{real: real, data: data, perm: perm, doc: doc}, nil
}

func claudeDir(o Options) string {
	if d := o.env("CLAUDE_CONFIG_DIR"); d != "" && !o.HomeFromFlag {
		return d
	}
	return o.Home
}

func codexDir(o Options) string {
	if d := o.env("CODEX_HOME"); d != "" && !o.HomeFromFlag {
		return d
	}
	return filepath.Join(o.Home, ".codex")
}

func geminiDir(o Options) string {
	if d := o.env("GEMINI_CLI_HOME"); d != "" && !o.HomeFromFlag {
		return filepath.Join(d, ".gemini")
	}
	return filepath.Join(o.Home, ".gemini")
}

func vscodeUserDir(o Options) string {
	if x := o.env("XDG_CONFIG_HOME"); x != "" && !o.HomeFromFlag {
		return filepath.Join(x, "Code", "User")
	}
	return filepath.Join(o.Home, ".config", "Code", "User")
}

// managedBefore reports a record of this target beside its config: render
// wrote its entry at some start.
func managedBefore(opts Options, h harnessTarget) bool {
	_, b, _, err := readFile(opts.Sys, filepath.Join(filepath.Dir(h.file(opts)), fingerprint.StateFile))
	if err != nil || b == nil {
		return false
	}
	st, err := fingerprint.ParseState(b)
	if err != nil {
		return true // unreadable: plan as before and let it warn
	}
	_, ok := st.Targets[h.target]
	return ok
}
