package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/render"
)

// R1: with no MEMPALACE_* variables a container start writes nothing but
// render's record beside the config it registers the local server in:
// nothing under ~/.cache (or $XDG_CACHE_HOME), no other file anywhere in
// the home, at the first start or at the next one.
func TestSolitaryStartWritesOnlyTheRecord(t *testing.T) {
	for _, xdgCache := range []bool{false, true} {
		root := t.TempDir()
		home := filepath.Join(root, "home")
		bin := filepath.Join(root, "bin")
		os.MkdirAll(bin, 0o755)
		os.WriteFile(filepath.Join(bin, "mempalace-mcp"), []byte("#!/bin/sh\n"), 0o755)
		// a user's own cache, which must stay exactly as it is
		os.MkdirAll(filepath.Join(home, ".cache", "other-app"), 0o755)
		os.WriteFile(filepath.Join(home, ".cache", "other-app", "x"), []byte("x"), 0o644)
		cache := ""
		if xdgCache {
			cache = filepath.Join(root, "xdg-cache")
			os.Mkdir(cache, 0o755)
		}
		t.Setenv("HOME", home)
		t.Setenv("PATH", bin)
		t.Setenv("XDG_CACHE_HOME", cache)
		for _, k := range []string{"XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR", "MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE"} {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
		for start := 1; start <= 2; start++ {
			if code, out, errOut := runCLI("render"); code != 0 {
				t.Fatalf("start %d: exit %d\n%s%s", start, code, out, errOut)
			}
			want := []string{
				".cache/", ".cache/other-app/", ".cache/other-app/x",
				".config/", ".config/opencode/", ".config/opencode/.devbox-config.json", ".config/opencode/opencode.jsonc",
			}
			if got := tree(t, home); !slices.Equal(got, want) {
				t.Errorf("XDG_CACHE_HOME set: %v, start %d: the home holds\n%q\nwant\n%q", xdgCache, start, got, want)
			}
			if xdgCache {
				if got := tree(t, cache); len(got) != 0 {
					t.Errorf("start %d wrote into $XDG_CACHE_HOME: %q", start, got)
				}
			}
		}
	}
}

// R1 for a harness whose config file lives outside its directory: a
// ~/.claude.json without ~/.claude/ (a fresh login, a volume that mounts
// only the file) is left byte for byte, with no .bak and no record beside
// it. It got a local mempalace entry, a .bak and render's record
// (outside tester, attack35 F1).
func TestSolitaryStartLeavesAClaudeJSONAlone(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	os.MkdirAll(home, 0o755)
	claude := []byte(`{"numStartups":3}`)
	os.WriteFile(filepath.Join(home, ".claude.json"), claude, 0o600)
	os.WriteFile(filepath.Join(root, "mempalace-mcp"), []byte("#!/bin/sh\n"), 0o755)
	t.Setenv("HOME", home)
	t.Setenv("PATH", root)
	for _, k := range []string{"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "PI_CODING_AGENT_DIR", "CLAUDE_CONFIG_DIR", "MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	code, out, errOut := runCLI("render")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	want := []string{".claude.json", ".config/", ".config/opencode/", ".config/opencode/.devbox-config.json", ".config/opencode/opencode.jsonc"}
	if got := tree(t, home); !slices.Equal(got, want) {
		t.Errorf("the home holds\n%q\nwant\n%q\n%s", got, want, out)
	}
	if got, _ := os.ReadFile(filepath.Join(home, ".claude.json")); string(got) != string(claude) {
		t.Errorf("~/.claude.json is now %s", got)
	}
}

// tree lists every entry under root, relative, directories with a
// trailing slash, in lexical order.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// R1 with mempalace-mcp in pipx's ~/.local/bin but not on PATH: doctor
// flags the entry render wrote exactly when render then removes it, and
// never flags what render left, whatever is there (a file, pipx's
// symlink, one not executable, a dangling link, a directory).
func TestRenderAndDoctorAgreeOnLocalBin(t *testing.T) {
	for _, c := range []struct {
		name  string
		place func(local, venv string)
	}{
		{"an executable", func(local, _ string) { os.WriteFile(local, []byte("#!/bin/sh\n"), 0o755) }},
		{"pipx's symlink", func(local, venv string) { os.WriteFile(venv, []byte("#!/bin/sh\n"), 0o755); os.Symlink(venv, local) }},
		{"not executable", func(local, _ string) { os.WriteFile(local, []byte("#!/bin/sh\n"), 0o644) }},
		{"a dangling symlink", func(local, venv string) { os.Symlink(venv, local) }},
		{"a directory", func(local, _ string) { os.Mkdir(local, 0o755) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			home, bin := filepath.Join(root, "home"), filepath.Join(root, "bin")
			venv := filepath.Join(home, ".local", "pipx", "venvs", "mempalace", "bin")
			os.MkdirAll(bin, 0o755)
			os.MkdirAll(venv, 0o755)
			os.MkdirAll(filepath.Join(home, ".local", "bin"), 0o755)
			os.WriteFile(filepath.Join(bin, "mempalace-mcp"), []byte("#!/bin/sh\n"), 0o755)
			t.Setenv("HOME", home)
			t.Setenv("PATH", bin)
			for _, k := range []string{"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "PI_CODING_AGENT_DIR", "MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE", "MEMPALACE_PALACE_PATH"} {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
			if code, out, errOut := runCLI("render"); code != 0 { // on PATH: render writes the entry
				t.Fatalf("render: exit %d\n%s%s", code, out, errOut)
			}
			c.place(filepath.Join(home, ".local", "bin", "mempalace-mcp"), filepath.Join(venv, "mempalace-mcp"))
			t.Setenv("PATH", filepath.Join(root, "empty"))
			_, out, errOut := runCLI("doctor")
			flagged := strings.Contains(out+errOut, "entry-command")
			if code, out, errOut := runCLI("render"); code != 0 {
				t.Fatalf("render without it on PATH: exit %d\n%s%s", code, out, errOut)
			}
			b, _ := os.ReadFile(filepath.Join(home, ".config", "opencode", "opencode.jsonc"))
			kept := strings.Contains(string(b), `"mempalace-mcp"`)
			if kept == flagged {
				t.Errorf("doctor flagged the entry render wrote: %v; render then kept it: %v\n%s\n%s%s", flagged, kept, b, out, errOut)
			}
			if _, out, errOut := runCLI("doctor"); strings.Contains(out+errOut, "entry-command") {
				t.Errorf("doctor flags what render just left:\n%s\n%s%s", b, out, errOut)
			}
			if wantKept := c.name == "an executable" || c.name == "pipx's symlink"; kept != wantKept {
				t.Errorf("render kept the entry: %v, want %v", kept, wantKept)
			}
		})
	}
}

// render --help says when each target is written: every harness render
// knows is named in it (an outside tester, attack12: the help described 8
// of 20, "These five only when ...").
func TestRenderHelpNamesEveryTarget(t *testing.T) {
	t.Parallel()
	for _, target := range render.AllTargets {
		if !regexp.MustCompile(`(^|[\s,(])` + regexp.QuoteMeta(target) + `([\s,.):]|$)`).MatchString(renderHelp) {
			t.Errorf("render --help does not name the target %s", target)
		}
	}
}
