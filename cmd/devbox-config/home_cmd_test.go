package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A mistyped HOME (or --home) is refused, not grown into a new home: each
// command that reads a home exits 2 naming the directory and the fix, and
// nothing is created there, with or without --dry-run. The edge too, which
// an MCP client sees exit with the message on stderr; before, it made the
// home (its palace and outbox in it). A file where the
// home should be is refused the same way.
func TestMissingHomeIsRefused(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "mempalace-mcp"), []byte("#!/bin/sh\n"), 0o755)
	aFile := filepath.Join(root, "file")
	os.WriteFile(aFile, []byte("x"), 0o644)
	t.Setenv("PATH", bin)
	t.Setenv("MEMPALACE_REMOTE_URL", "http://127.0.0.1:1/mcp")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "secret")
	for _, k := range []string{"XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR", "MEMPALACE_PALACE_PATH"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	existing := filepath.Join(root, "home")
	os.Mkdir(existing, 0o755)
	for _, c := range []struct {
		home string // HOME
		args []string
		bad  string // the directory the error must name
		fix  string
	}{
		{filepath.Join(root, "nohome1"), []string{"render"}, filepath.Join(root, "nohome1"), "set HOME"},
		{filepath.Join(root, "nohome2"), []string{"render", "--dry-run"}, filepath.Join(root, "nohome2"), "set HOME"},
		{aFile, []string{"render"}, aFile, "set HOME"},
		{existing, []string{"render", "--home", filepath.Join(root, "nohome3")}, filepath.Join(root, "nohome3"), "pass --home"},
		{filepath.Join(root, "nohome4"), []string{"doctor"}, filepath.Join(root, "nohome4"), "set HOME"},
		{existing, []string{"doctor", "--fix", "--home", filepath.Join(root, "nohome5")}, filepath.Join(root, "nohome5"), "pass --home"},
		{filepath.Join(root, "nohome6"), []string{"join"}, filepath.Join(root, "nohome6"), "set HOME"},
		{filepath.Join(root, "nohome7"), []string{"edge"}, filepath.Join(root, "nohome7"), "set HOME"},
	} {
		t.Setenv("HOME", c.home)
		code, out, errOut := runCLI(c.args...)
		if code != 2 || !strings.Contains(errOut, c.bad) || !strings.Contains(errOut, c.fix) {
			t.Errorf("HOME=%s %v: exit %d, want 2 naming %s and %q\n%s%s", c.home, c.args, code, c.bad, c.fix, out, errOut)
		}
		if (c.args[0] == "edge" || c.args[0] == "join") && strings.Contains(errOut, "--home") {
			t.Errorf("HOME=%s %v: the fix names --home, which the command does not take:\n%s", c.home, c.args, errOut)
		}
		if fi, err := os.Stat(c.bad); err == nil && fi.IsDir() {
			t.Errorf("HOME=%s %v created %s", c.home, c.args, c.bad)
		}
	}
	if got := tree(t, existing); len(got) != 0 {
		t.Errorf("the existing HOME was written to: %q", got)
	}
}

// A relative HOME that exists below the working directory is refused as a
// missing one is (exit 2, naming HOME and the fix), by every command that
// reads a home, and nothing is created below it: render wrote
// ./rel/.config/opencode/opencode.jsonc (attack114 F3).
func TestRelativeHomeIsRefused(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	os.Mkdir("rel", 0o755)
	for _, k := range []string{"XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR", "MEMPALACE_PALACE_PATH", "MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("HOME", "rel")
	for _, args := range [][]string{{"render"}, {"render", "--dry-run"}, {"doctor"}, {"join"}, {"edge"}, {"edge", "status"}, {"edge", "flush"}, {"edge", "outbox", "list"}} {
		code, out, errOut := runCLI(args...)
		if code != 2 || !strings.Contains(errOut, `HOME is "rel", a relative path`) || !strings.Contains(errOut, "(fix: set HOME to your home directory's absolute path") {
			t.Errorf("HOME=rel %v: exit %d, want 2 naming HOME, that it is relative, and the fix\n%s%s", args, code, out, errOut)
		}
	}
	if got := tree(t, filepath.Join(root, "rel")); len(got) != 0 {
		t.Errorf("written below the working directory: %q", got)
	}
	// An absolute path with a space before it is relative as it stands:
	// said so, the space shown (attack115 F5).
	t.Setenv("HOME", " "+root)
	if code, _, errOut := runCLI("render", "--dry-run"); code != 2 || !strings.Contains(errOut, `HOME is " `+root+`", a path with whitespace around it`) {
		t.Errorf("HOME with a space before it: exit %d\n%s", code, errOut)
	}
	// After it: absolute, but no such directory; quoted, the space said
	// (attack116 F4: "HOME is /abs , which does not exist").
	t.Setenv("HOME", root+" ")
	if code, _, errOut := runCLI("render", "--dry-run"); code != 2 || !strings.Contains(errOut, `HOME is "`+root+` ", which does not exist (whitespace around it is part of the path)`) {
		t.Errorf("HOME with a space after it: exit %d\n%s", code, errOut)
	}
}
