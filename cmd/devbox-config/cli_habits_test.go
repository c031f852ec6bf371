package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/render"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// --version prints what `version` prints.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	code, flag, _ := runCLI("--version")
	_, cmd, _ := runCLI("version")
	if code != 0 || flag != cmd || !strings.HasPrefix(flag, "devbox-config ") {
		t.Fatalf("--version: exit %d %q, version: %q", code, flag, cmd)
	}
}

// A build with no commit stamped or recorded (plain go build, GOFLAGS
// -buildvcs=false) names its executable's digest, so two such builds are
// told apart (attack56 V1: three releases all said "commit unknown").
func TestVersionOfAnUnstampedBuildNamesItsDigest(t *testing.T) {
	t.Parallel()
	if commit != "" {
		t.Skip("a stamped build")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("(executable sha256 %x)", sha256.Sum256(b))[:len("(executable sha256 ")+12] + ")"
	_, out, _ := runCLI("version")
	if !strings.Contains(out, "commit unknown") {
		t.Skip("a commit is recorded: " + out)
	}
	if !strings.Contains(out, want) {
		t.Errorf("version: %q, want %q", out, want)
	}
}

// A mistake at any level of the tree exits 2 and says which command to ask
// for help, including the commands that only group others (which used to
// print their help and exit 0).
func TestUsageMistakesNameTheCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, `unknown command "nosuch" for "devbox-config" (run 'devbox-config --help' for usage)`},
		{[]string{"render", "nosuch"}, `run 'devbox-config render --help'`},
		{[]string{"edge", "nosuch"}, `run 'devbox-config edge --help'`},
		{[]string{"edge", "outbox", "nosuch"}, `unknown command "nosuch" for "devbox-config edge outbox" (run 'devbox-config edge outbox --help' for usage)`},
		{[]string{"gateway", "nosuch"}, `run 'devbox-config gateway --help'`},
		{[]string{"gateway", "device", "nosuch"}, `run 'devbox-config gateway device --help'`},
		{[]string{"gateway", "token", "nosuch"}, `run 'devbox-config gateway token --help'`},
		{[]string{"gateway", "audit", "nosuch"}, `run 'devbox-config gateway audit --help'`},
		{[]string{"completion", "nosuch"}, `unknown command "nosuch" for "devbox-config completion"`},
		{[]string{"edge", "outbox", "retry"}, `devbox-config edge outbox retry: accepts 1 arg(s), received 0 (run 'devbox-config edge outbox retry --help' for usage)`},
		{[]string{"edge", "outbox", "drop"}, `devbox-config edge outbox drop: accepts 1 arg(s)`},
		{[]string{"gateway", "token", "issue"}, `devbox-config gateway token issue: accepts 1 arg(s)`},
		{[]string{"render", "--bogus"}, `run 'devbox-config render --help'`},
	} {
		code, _, errOut := runCLI(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	// a group on its own still shows its help
	if code, out, _ := runCLI("edge", "outbox"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("edge outbox alone: exit %d\n%s", code, out)
	}
}

// `help TOPIC` with no such command is a usage mistake like any other: exit
// 2 and the hint (it printed the root's help and exited 0); help for a real
// command, and completion of help's argument, still work.
func TestHelpUnknownTopic(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help", "nosuch"}, {"help", "edge", "nosuch"}} {
		code, out, errOut := runCLI(args...)
		want := fmt.Sprintf("devbox-config: unknown help topic %q (run 'devbox-config --help' for usage)\n", strings.Join(args[1:], " "))
		if code != 2 || errOut != want || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", args, code, out, errOut, want)
		}
	}
	for _, args := range [][]string{{"help"}, {"help", "render"}, {"help", "edge", "outbox"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || !strings.Contains(out, "Usage:") || errOut != "" {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if _, out, _ := runCLI("help", "render"); !strings.Contains(out, "--target") {
		t.Errorf("help render is not render's help:\n%s", out)
	}
	if _, out, _ := runCLI("__complete", "help", "ren"); !strings.HasPrefix(out, "render") {
		t.Errorf("completion of help's topic: %q", out)
	}
}

// Shell completion offers the render targets for --target, and after a
// comma the rest of the list prefixed with what was typed (it offered bare
// names there, which the shell never matches against "opencode,").
func TestTargetCompletion(t *testing.T) {
	t.Parallel()
	_, out, _ := runCLI("__complete", "render", "--target", "")
	for _, tg := range render.AllTargets {
		if !strings.Contains(out, tg+"\n") {
			t.Errorf("--target completion lacks %s:\n%s", tg, out)
		}
	}
	complete := func(word string) []string {
		t.Helper()
		code, out, _ := runCLI("__complete", "render", "--target", word)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) == 0 || lines[len(lines)-1] != ":4" { // ShellCompDirectiveNoFileComp
			t.Fatalf("completion of %q: exit %d\n%s", word, code, out)
		}
		return lines[:len(lines)-1]
	}
	var want []string
	for _, tg := range render.AllTargets {
		if tg != "opencode" {
			want = append(want, "opencode,"+tg)
		}
	}
	if got := complete("opencode,"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after 'opencode,': %q, want %q", got, want)
	}
	if got := complete("opencode,pi"); strings.Join(got, " ") != "opencode,pi opencode,pi-mcp" {
		t.Errorf("after 'opencode,pi': %q", got)
	}
	var wantC []string // every target starting with c, in render's order
	for _, tg := range render.AllTargets {
		if strings.HasPrefix(tg, "c") {
			wantC = append(wantC, "pi,opencode,"+tg)
		}
	}
	if got := complete("pi,opencode,c"); len(wantC) < 3 || strings.Join(got, " ") != strings.Join(wantC, " ") {
		t.Errorf("after 'pi,opencode,c': %q, want %q", got, wantC)
	}
	if got := complete("ve"); len(got) != 0 {
		t.Errorf("after 've': %q", got)
	}
	// nothing is built on a name render refuses or an empty item
	for _, word := range []string{"nosuch,", "OPENCODE,", "opencode,,", ",", "opencode,nosuch,"} {
		if got := complete(word); len(got) != 0 {
			t.Errorf("after %q: %q, want nothing (render refuses that list)", word, got)
		}
	}
	if got := complete("opencode, p"); strings.Join(got, " ") != "opencode, pi opencode, pi-mcp" {
		t.Errorf("after 'opencode, p': %q", got)
	}
}

// An empty outbox lists as [] in JSON (not null), so `jq length` works.
func TestOutboxListJSONEmpty(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	os.MkdirAll(filepath.Join(palace, "edge"), 0o755)
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	code, out, errOut := runCLI("edge", "outbox", "list", "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("outbox list --json on an empty outbox: exit %d %q %s", code, out, errOut)
	}
}

// --json with --diff (or --dry-run) carries the diff inside each object.
func TestRenderJSONWithDiff(t *testing.T) {
	t.Setenv("MEMPALACE_REMOTE_URL", "https://palace.example.org/mcp")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok-SECRET-json-diff")
	var home string
	for _, flag := range []string{"--dry-run", "--diff"} {
		home = t.TempDir()
		code, out, errOut := runCLI("render", "--home", home, "--target", "opencode", "--json", flag)
		var r struct {
			Target, Action, Diff string
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); code != 0 || err != nil {
			t.Fatalf("%s: exit %d, %v\n%s%s", flag, code, err, out, errOut)
		}
		if r.Target != "opencode" || !strings.Contains(r.Diff, "+++ b") || !strings.Contains(r.Diff, `"Bearer {env:MEMPALACE_REMOTE_TOKEN}"`) {
			t.Fatalf("%s: %+v", flag, r)
		}
		if strings.Contains(out, "tok-SECRET-json-diff") {
			t.Fatal("the token is in the output")
		}
	}
	_, out, _ := runCLI("render", "--home", home, "--target", "opencode", "--json")
	if strings.Contains(out, `"diff"`) {
		t.Errorf("plain --json carries a diff: %s", out)
	}
}

// TestHelpNamesTheVariablesTheEdgeReads: `edge --help` names every variable
// the edge reads, and the root --help the edge's own (its palace, timeout
// and lease among them), as devbox.md documents them.
func TestHelpNamesTheVariablesTheEdgeReads(t *testing.T) {
	t.Parallel()
	_, edgeHelp, _ := runCLI("edge", "--help")
	_, rootHelp, _ := runCLI("--help")
	own := []string{ladder.EnvPalacePath, ladder.EnvEdgeTimeout, ladder.EnvEdgeLease, ladder.EnvEdgeLog, ladder.EnvEdgeChild}
	for _, v := range append(own, "MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_AGENT_NAME", "MEMPALACE_ORIGIN_LABEL", "MEMPALACE_ORIGIN_DEVICE", ladder.EnvFromParent) {
		if !strings.Contains(edgeHelp, v) {
			t.Errorf("edge --help does not name %s", v)
		}
	}
	for _, v := range own {
		if !strings.Contains(rootHelp, v) {
			t.Errorf("--help's Also read does not name %s", v)
		}
	}
}

// TestNoFlagStatesItsDefaultTwice: a flag whose usage says its default
// (mailbox's --timeout: MEMPALACE_EDGE_TIMEOUT, else 10s) is not followed by
// pflag's own "(default …)" as well, in any command's --help.
func TestNoFlagStatesItsDefaultTwice(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, l := range strings.Split(c.LocalFlags().FlagUsages(), "\n") {
			if strings.Count(l, "(default") > 1 {
				t.Errorf("%s: %s", c.CommandPath(), strings.TrimSpace(l))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(&bytes.Buffer{}, &bytes.Buffer{}))
}
