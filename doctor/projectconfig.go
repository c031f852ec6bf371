package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/render"
)

// projectEntries is the rest of entry-unused (attack101 F4): a project
// config that opencode, or Gemini CLI in a trusted folder, loads when it is
// started in opts.Dir, with a mempalace entry of its own. The harness
// takes it over the user-level one without asking and expands the token
// reference in it into a request to whatever URL it names. Where they
// look (opencode 1.18.33, Gemini CLI 0.61.0): opencode, unless
// OPENCODE_DISABLE_PROJECT_CONFIG, opencode.json[c] and
// .opencode/opencode.json[c] in every directory from the cwd up to its
// git worktree's top (the file system's root outside one), and always
// ~/.opencode/opencode.json[c]; Gemini, .gemini/settings.json in the cwd
// alone (not in $HOME, which is the user's own).
func projectEntries(opts Options) []Finding {
	if opts.Dir == "" {
		return nil
	}
	var out []Finding
	oc, _ := harness.ByName("opencode")
	var dirs []string
	if v, _ := opts.Env("OPENCODE_DISABLE_PROJECT_CONFIG"); v != "1" && !strings.EqualFold(v, "true") {
		dirs = upToWorktree(opts.Dir)
	}
	var ocFiles []string
	for _, dir := range dirs {
		ocFiles = append(ocFiles, filepath.Join(dir, "opencode.jsonc"), filepath.Join(dir, "opencode.json"))
	}
	if home := filepath.Clean(opts.Home); !slices.Contains(dirs, home) {
		dirs = append(dirs, home)
	}
	for _, dir := range dirs {
		ocFiles = append(ocFiles, filepath.Join(dir, ".opencode", "opencode.jsonc"), filepath.Join(dir, ".opencode", "opencode.json"))
	}
	fix := "if you did not put it there, remove mcp.mempalace from the file (or rename the server); a repository's own config is loaded without a prompt, so start opencode there with OPENCODE_DISABLE_PROJECT_CONFIG=1 until it is gone"
	env := harness.Env{Home: opts.Home, HomeFromFlag: opts.HomeFromFlag, Lookup: opts.Env}
	for _, f := range ocFiles {
		out = append(out, projectEntry(env, oc, f, "opencode loads it when started in "+opts.Dir, fix)...)
	}
	gem, _ := harness.ByName("gemini")
	return append(out, projectEntry(env, gem, filepath.Join(opts.Dir, ".gemini", "settings.json"),
		"Gemini CLI loads it when started in "+opts.Dir+" if that folder is trusted (a TRUST_FOLDER or TRUST_PARENT rule in ~/.gemini/trustedFolders.json, security.folderTrust.enabled false, or GEMINI_CLI_TRUST_WORKSPACE=true)",
		"if you did not put it there, remove mcpServers.mempalace from the file (or rename the server), or stop trusting the folder (a DO_NOT_TRUST rule for it in ~/.gemini/trustedFolders.json)")...)
}

// projectEntry is the finding for file if it holds rec's entry and is not
// the user-level config (the cwd is its directory).
func projectEntry(env harness.Env, rec harness.Record, file, loads, fix string) []Finding {
	if filepath.Dir(file) == filepath.Clean(rec.Location.DirPath(env)) {
		return nil
	}
	entry, err := render.Entry(rec, file)
	if err != nil || entry == nil { // no file, no entry, or one the harness cannot read either
		return nil
	}
	return []Finding{{ID: IDEntryUnused, Severity: Warn, Section: "§4.1",
		Message: fmt.Sprintf("%s: a project config with its own %s; %s, and it replaces the user-level entry: the MemPalace entry is there but unused, and a MEMPALACE_REMOTE_TOKEN reference in this one sends the device token to the URL it names",
			file, strings.Join(rec.Pointer(), "."), loads),
		Fix: fix}}
}

// upToWorktree is dir and each directory above it up to the first that
// holds .git (opencode's worktree), or up to the root.
func upToWorktree(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		out = append(out, d)
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil || d == filepath.Dir(d) {
			return out
		}
	}
}
