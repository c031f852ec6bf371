package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// usageCases are mistakes at every level of the command tree, and a few
// right uses beside them.
var usageCases = [][]string{
	{"nosuch"}, {"--bogus"}, {"nosuch", "--help"},
	{"render", "nosuch"}, {"render", "--bogus"}, {"render", "--diff=maybe"}, {"render", "--target", "nope"},
	{"edge", "nosuch"}, {"edge", "--bogus"}, {"edge", "status", "x"}, {"edge", "flush", "x"}, {"edge", "flush", "--timeout", "soon"},
	{"edge", "outbox", "nosuch"}, {"edge", "outbox", "list", "x"}, {"edge", "outbox", "list", "--bogus"},
	{"edge", "outbox", "retry"}, {"edge", "outbox", "retry", "a", "b"}, {"edge", "outbox", "drop"},
	{"gateway", "nosuch"}, {"gateway"}, {"gateway", "--listen", "127.0.0.1:1"}, {"gateway", "--listen", ":1", "--upstream", "http://x/mcp"},
	{"gateway", "init", "x"}, {"gateway", "device", "nosuch"}, {"gateway", "device", "add"}, {"gateway", "device", "add", "a", "b"},
	{"gateway", "device", "list", "x"}, {"gateway", "device", "remove"}, {"gateway", "device", "add", "a", "--kg"},
	{"gateway", "device", "list"}, {"gateway", "device", "remove", "a"}, {"gateway", "token", "issue", "a"},
	{"gateway", "token", "nosuch"}, {"gateway", "token", "issue"}, {"gateway", "token", "rotate"}, {"gateway", "token", "revoke"},
	{"gateway", "audit", "nosuch"}, {"gateway", "audit", "verify", "a", "b"}, {"gateway", "audit", "verify"},
	{"doctor", "x"}, {"doctor", "--bogus"}, {"join", "x"}, {"join", "--verify", "some"}, {"mailbox", "x"}, {"mailbox"},
	{"version", "x"}, {"completion", "nosuch"}, {"completion", "bash", "x"},
	{"help", "nosuch"}, {"help", "edge", "nosuch"},
}

// TestUsageGolden pins what every usage mistake prints and exits with
// (testdata/usage.golden; UPDATE_GOLDEN=1 rewrites it): the command
// tree's habits are one contract, kept across refactors.
func TestUsageGolden(t *testing.T) {
	golden, err := filepath.Abs(filepath.Join("testdata", "usage.golden"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HOME", dir)
	t.Setenv("PATH", dir)
	for _, k := range os.Environ() {
		if name, _, _ := strings.Cut(k, "="); strings.HasPrefix(name, "MEMPALACE_") || strings.HasPrefix(name, "XDG_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	var b strings.Builder
	for _, args := range usageCases {
		code, out, errOut := runCLI(args...)
		fmt.Fprintf(&b, "$ devbox-config %s\nexit %d\n", strings.Join(args, " "), code)
		if out != "" {
			first, _, _ := strings.Cut(out, "\n")
			fmt.Fprintf(&b, "stdout %q (%d lines)\n", first, strings.Count(out, "\n"))
		}
		for _, l := range strings.SplitAfter(strings.ReplaceAll(errOut, dir, "$DIR"), "\n") {
			if l != "" {
				fmt.Fprintf(&b, "stderr %s", l)
			}
		}
		b.WriteString("\n")
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("usage output differs from %s (UPDATE_GOLDEN=1 to accept on purpose):\n%s", golden, lineDiff(string(want), b.String()))
	}
}

// lineDiff lists the lines of got that differ from want, by position.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			fmt.Fprintf(&out, "line %d:\n- %s\n+ %s\n", i+1, a, b)
		}
	}
	return out.String()
}
