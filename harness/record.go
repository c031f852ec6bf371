package harness

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/ladder"
)

// Format is how a harness's config file is written.
type Format string

const (
	// JSON is strict JSON: the harness reads it with JSON.parse, so a
	// comment makes it refuse the file and render refuses it first.
	JSON Format = "json"
	// JSONC is JSON with comments and trailing commas.
	JSONC Format = "jsonc"
	// CommentedJSON is JSON with comments but no trailing commas: the
	// harness strips comments, then calls JSON.parse, so render refuses a
	// trailing comma first.
	CommentedJSON Format = "json-with-comments"
	// TOML is spliced table by table (Codex).
	TOML Format = "toml"
	// YAML is spliced entry by entry in block style.
	YAML Format = "yaml"
)

// Scope says when render writes a harness's entry at all.
type Scope string

const (
	// Always: the images registered MemPalace with this harness before
	// render existed (opencode), so render manages it at every start and
	// creates its file; R1's solitary entry is the one they wrote.
	Always Scope = "always"
	// FileExists: written when the file exists or --target names the
	// target (pi-mcp-adapter's mcp.json).
	FileExists Scope = "file-exists"
	// OptIn: written when the harness is set up here (its directory
	// exists) or --target names it; in solitary mode only once render
	// has managed it (R1: nothing registers MemPalace where nothing did
	// before).
	OptIn Scope = "opt-in"
)

// Env is what locating a file reads: the home directory and, unless the
// home came from --home, the harness's own directory variables.
type Env struct {
	Home         string
	HomeFromFlag bool
	Lookup       ladder.Lookup
}

// get is a directory variable's value, "" when unset, blank, relative or
// padded: a relative one is invalid (the XDG spec says so of
// XDG_CONFIG_HOME, and render treats every harness's variable alike), and
// one with whitespace around its path is relative to the harness, which
// keeps the whitespace. Either is ignored with a warning (Warnings), never
// resolved against render's working directory nor trimmed into a
// directory the harness does not read.
func (e Env) get(name string) string {
	if v := e.raw(name); filepath.IsAbs(v) && v == strings.TrimSpace(v) {
		return v
	}
	return ""
}

// raw is a directory variable's value as set, "" when unset or blank (a
// blank one is taken for unset, silently, as it always was: R1).
func (e Env) raw(name string) string {
	if name == "" || e.HomeFromFlag || e.Lookup == nil {
		return ""
	}
	if v, _ := e.Lookup(name); strings.TrimSpace(v) != "" {
		return v
	}
	return ""
}

// Warnings name each directory variable a harness reads that get ignores
// (relative, or padded with whitespace), once however many harnesses read
// it, with the fix.
func (e Env) Warnings() []ladder.Warning {
	var out []ladder.Warning
	seen := map[string]bool{}
	for _, r := range All() {
		vars := []string{r.Location.DirEnv, r.Location.HomeEnv}
		if r.Location.XDG {
			vars = append(vars, "XDG_CONFIG_HOME")
		}
		for _, name := range vars {
			if e.raw(name) == "" || e.get(name) != "" || seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, e.ignored(name))
		}
	}
	return out
}

// ignored is the warning for a directory variable get ignores.
func (e Env) ignored(name string) ladder.Warning {
	v := e.raw(name)
	t := strings.TrimSpace(v)
	if v != t && filepath.IsAbs(t) {
		return ladder.Warning{Var: name,
			Message: "has whitespace before or after its path, which the harness keeps (to it that is a relative path, below whatever directory it runs in), so it is ignored and the default directory is used",
			Fix:     fmt.Sprintf("set it to the path alone (%s=%s), or unset it", name, t)}
	}
	return ladder.Warning{Var: name,
		Message: fmt.Sprintf("%q is a relative path, so it is ignored and the default directory is used (a relative one would put configs below whatever directory render runs in)", v),
		Fix:     fmt.Sprintf("make it an absolute path, such as %s, or unset it", filepath.Join(e.Home, strings.TrimPrefix(t, "~/")))}
}

// Location is where a harness keeps its user-level config.
type Location struct {
	// Dir is the config directory, relative to the home directory ("" is
	// the home directory itself), or to $XDG_CONFIG_HOME (default
	// ~/.config) when XDG is set. Every directory variable set to a
	// relative path is ignored (Env.Warnings).
	Dir string
	XDG bool
	// DirEnv names a variable that replaces the whole directory
	// (CODEX_HOME); HomeEnv one that replaces the home directory under
	// it (GEMINI_CLI_HOME). Both are ignored with --home.
	DirEnv, HomeEnv string
	// Files are the names the harness reads in the directory, lowest
	// precedence first; empty means Write.
	Files []string
	// Write are the names render may edit, preferred first: the one that
	// holds the entry, else the first that exists, else Write[0] (new).
	Write []string
	// FirstOnly: the harness reads only the first of Write that exists,
	// never the others (Amp: settings.json, else settings.jsonc), so that
	// one is edited, wherever the entry is, and a new file is never
	// created beside one of them.
	FirstOnly bool
	// Marker is the directory, relative to the home directory, whose
	// existence says the harness is set up here ("" : the config
	// directory). With DirEnv set, the directory it names is the marker.
	Marker string
}

// DirPath is the config directory.
func (l Location) DirPath(e Env) string {
	if d := e.get(l.DirEnv); d != "" {
		return d
	}
	home := e.Home
	if h := e.get(l.HomeEnv); h != "" {
		home = h
	}
	if l.XDG {
		base := filepath.Join(home, ".config")
		if x := e.get("XDG_CONFIG_HOME"); x != "" {
			base = x
		}
		return filepath.Join(base, l.Dir)
	}
	return filepath.Join(home, l.Dir)
}

// MarkerPath is the directory whose existence says the harness is set up.
func (l Location) MarkerPath(e Env) string {
	if l.Marker == "" || e.get(l.DirEnv) != "" {
		return l.DirPath(e)
	}
	return filepath.Join(e.Home, l.Marker)
}

// Names are the files the harness reads, lowest precedence first.
func (l Location) Names() []string {
	if len(l.Files) > 0 {
		return l.Files
	}
	return l.Write
}

// Path is the file render writes when none exists yet.
func (l Location) Path(e Env) string { return filepath.Join(l.DirPath(e), l.Write[0]) }

// Entries are an entry's JSON for each rung, as text/template sources:
// {{json .URL}} is the primary's URL as a JSON string, {{.Token}} the
// harness's reference to MEMPALACE_REMOTE_TOKEN (Record.EnvRef).
type Entries struct {
	Solitary, Remote, Edge string
}

// For is the entry template of a rung.
func (e Entries) For(m ladder.Mode) string {
	switch m {
	case ladder.Remote:
		return e.Remote
	case ladder.Edge:
		return e.Edge
	}
	return e.Solitary
}

// Record is one harness.
type Record struct {
	// Name is the render target (--target) and MEMPALACE_EDGE_HARNESS.
	Name string
	// Title is the harness's own name, for people.
	Title    string
	Location Location
	Format   Format
	// Key is the key path of the MCP map in the file; the entry is
	// Key + Server. ListKey, when set, makes the map a YAML list whose
	// items are named by ListKey (Continue's `- name: mempalace`).
	Key     []string
	ListKey string
	Scope   Scope
	// EnvRef is how the harness references an environment variable in a
	// header value, as a fmt format with one %s ("${%s}"); "" when it
	// cannot (the entry names the variable, or the remote rung bridges).
	EnvRef  string
	Entries Entries
	// Was are entries earlier versions of render wrote where Entries
	// differs: one its harness saved with its references expanded (Gemini
	// CLI's and Qwen Code's settings saves) is still recognised as render's.
	Was []Entries
	// Schema is the "$schema" value a file render creates starts with (the
	// harness would insert it itself, rewriting the file). An existing
	// file never gets it from render: every byte outside the entry stays.
	Schema string
	// Lock names the harness when it writes its own file under
	// <file>.lock (proper-lockfile), which render then takes too.
	Lock string
	// Adopts recognises an entry an older generator wrote: it has no
	// record but is not a user's edit, so the environment may replace it.
	Adopts func(entry []byte) bool
	// Skeleton starts a file render creates (what the harness needs
	// beside the entry to accept the file at all).
	Skeleton string
	// Settings, when set, makes the target a settings merge instead of a
	// managed entry: missing keys of this template are added (pi).
	Settings func() []byte
	// NoBOM: the harness refuses, or reads no server from, a file that
	// starts with a UTF-8 byte order mark, so render refuses it first.
	NoBOM bool
	// FixedEnv: the harness starts a stdio server with a fixed handful of
	// variables, not its own environment, so each entry hands it every
	// ladder.ServerVars name (never a value): by name (Codex's env_vars)
	// or through MEMPALACE_ENV_FROM_PARENT.
	FixedEnv bool
	// Redacts matches the names the harness removes from a stdio server's
	// inherited environment unless the entry's env sets them (Gemini CLI's
	// sanitizeEnvironment); nil when it removes none by name. Its entries
	// that start bridge or edge set MEMPALACE_ENV_FROM_PARENT=1.
	Redacts *regexp.Regexp
	// HandBack is the harness's reference to a variable in a stdio
	// server's env, as a fmt format with one %s, that expands to its value
	// from the harness's environment, or to "" when it is unset (an
	// earlier edge entry's: Was).
	HandBack string
	// Traps are what bit, for docs/harnesses.md and the reader.
	Traps []string
	// Ignores are settings beside the entry, in the file render writes,
	// that make the harness not use it (render warns, doctor reports:
	// render.Ignored is the one evaluator).
	Ignores []Ignore
	// MergedFrom, relative to the home directory, is a file whose own
	// entry of the same name the harness merges field by field under the
	// entry render writes: a field there that render's entry lacks ends
	// up in it (render warns, doctor reports). MergeDrops are the fields
	// of that entry the harness drops first when render's entry has the
	// key (pi-mcp-adapter's mergeServerMaps: a "command" drops the url's).
	MergedFrom string
	MergeDrops map[string][]string
}

// Ignore is a setting that makes a harness not use its MemPalace entry.
type Ignore struct {
	// Path is a key path in the file render writes; "*" stands for each
	// key at its level (Claude Code's projects, one per directory).
	Path []string
	// When says what at Path makes the harness ignore the entry.
	When Condition
	// Remote: only in the remote and edge rungs (in solitary the entry
	// that wins runs the same local server).
	Remote bool
	// Fold: a list names the server with case and surrounding spaces
	// ignored (Gemini's normalizeServerId); otherwise exactly (Claude Code).
	Fold bool
	// Why says what the harness does instead; Fix is the fix. In both,
	// {key} is the key "*" matched.
	Why, Fix string
}

// Condition is what at an Ignore's path makes the harness ignore the entry.
type Condition string

const (
	// Present: any value there (an entry that wins over render's).
	Present Condition = "present"
	// Lists: a list there names the server (see Fold).
	Lists Condition = "lists"
	// Omits: a list there does not name the server (an allow-list).
	Omits Condition = "omits"
)

// Server is the name of the entry in every harness's MCP map.
const Server = "mempalace"

// Pointer is the key path of the managed entry.
func (r Record) Pointer() []string {
	return append(append([]string(nil), r.Key...), Server)
}

// TokenRef is the harness's reference to the token's variable.
func (r Record) TokenRef() (string, error) {
	if r.EnvRef == "" {
		return "", fmt.Errorf("%s cannot reference %s from the environment in a header", r.Title, ladder.EnvRemoteToken)
	}
	return fmt.Sprintf(r.EnvRef, ladder.EnvRemoteToken), nil
}

// ByName is the record of a target.
func ByName(name string) (Record, bool) {
	for _, r := range All() {
		if r.Name == name {
			return r, true
		}
	}
	return Record{}, false
}

// Names are the targets, in the order they run.
func Names() []string {
	var out []string
	for _, r := range All() {
		out = append(out, r.Name)
	}
	return out
}

// Command is the program a stdio entry starts and its arguments, in any of
// the records' shapes: "command" a string with "args" (most), "command" a
// list (opencode, Kilo), "cmd" (Goose). cmd is "" for an entry that starts
// nothing (a remote one) or that is not an object.
func Command(entry []byte) (cmd string, args []string) {
	var e struct {
		Command json.RawMessage `json:"command"`
		Cmd     string          `json:"cmd"`
		Args    []string        `json:"args"`
	}
	if (confpos.JSON{}).DecodeJSON("entry", entry, &e) != nil { // keys as the harness reads them: exactly
		return "", nil
	}
	var list []string
	switch {
	case json.Unmarshal(e.Command, &cmd) == nil:
	case json.Unmarshal(e.Command, &list) == nil && len(list) > 0:
		cmd, args = list[0], list[1:]
	default:
		cmd = e.Cmd
	}
	return cmd, append(args, e.Args...)
}
