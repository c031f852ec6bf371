package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/joakimp/devbox-config/testbed"
)

// TestMain lets testscript run the real command in-process as
// "devbox-config", the way chezmoi tests its CLI. The tests' files are on
// a tmpfs (testbed.OnTmpfs), and eight parallel tests run at once
// (testbed.WaitingTests): most wait on a gateway, a primary or a timeout.
func TestMain(m *testing.M) {
	testscript.Main(waiting{testbed.OnTmpfs(testbed.RemovingBuilds(m))}, map[string]func(){
		"devbox-config": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// waiting sets the tests' parallelism as m runs them: testscript.Main
// runs the command instead when the binary is started as it, whose
// arguments are no test flags.
type waiting struct{ m testscript.TestingM }

func (w waiting) Run() int {
	testbed.WaitingTests(8)
	return w.m.Run()
}

// TestRenderScripts runs the golden cases in testdata/render: each txtar
// holds the environment, the input files, the command and the expected
// bytes. UPDATE_GOLDEN=1 rewrites the expected files from the output.
func TestRenderScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           filepath.Join("..", "..", "testdata", "render"),
		UpdateScripts: os.Getenv("UPDATE_GOLDEN") == "1",
		Setup: func(e *testscript.Env) error {
			// A home exists (render refuses one that does not).
			home := filepath.Join(e.WorkDir, "home")
			if err := os.MkdirAll(home, 0o755); err != nil {
				return err
			}
			e.Setenv("HOME", home)
			// Only the test's own bin dir and the command: a mempalace-mcp
			// on the developer's PATH must not change the outcome.
			path := e.Getenv("PATH")
			first, _, _ := strings.Cut(path, string(os.PathListSeparator))
			e.Setenv("PATH", strings.Join([]string{filepath.Join(e.WorkDir, "bin"), first, "/usr/bin", "/bin"}, string(os.PathListSeparator)))
			for _, v := range []string{"XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR"} {
				e.Setenv(v, "")
			}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond != "bindmount" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			// A file bind mount needs root and a private mount namespace.
			return os.Getuid() == 0 && exec.Command("unshare", "-m", "true").Run() == nil, nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"mtime":    cmdMtime,
			"crlf":     cmdCRLF,
			"nosecret": cmdNoSecret,
			"bakcount": cmdBakCount,
			"cmpbak":   cmdCmpBak,
			"bom":      cmdBOM,
		},
	})
}

// mtime save FILE | mtime same FILE: the file's modification time is what
// it was when saved (proves "nothing was written", not just "same bytes").
func cmdMtime(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || (args[0] != "save" && args[0] != "same") {
		ts.Fatalf("usage: mtime save|same FILE")
	}
	fi, err := os.Stat(ts.MkAbs(args[1]))
	ts.Check(err)
	key := "MTIME_" + strconv.Itoa(int(hash(args[1])))
	now := strconv.FormatInt(fi.ModTime().UnixNano(), 10)
	if args[0] == "save" {
		ts.Setenv(key, now)
		return
	}
	same := ts.Getenv(key) == now
	if same == neg {
		ts.Fatalf("%s: modification time changed=%v, want changed=%v", args[1], !same, neg)
	}
}

// crlf FILE...: convert LF line endings to CRLF in place.
func cmdCRLF(ts *testscript.TestScript, neg bool, args []string) {
	for _, a := range args {
		p := ts.MkAbs(a)
		b, err := os.ReadFile(p)
		ts.Check(err)
		b = bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
		ts.Check(os.WriteFile(p, b, 0o644))
	}
}

// nosecret SECRET DIR: no file below DIR contains SECRET.
func cmdNoSecret(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: nosecret SECRET DIR")
	}
	n := 0
	err := filepath.WalkDir(ts.MkAbs(args[1]), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		if bytes.Contains(b, []byte(args[0])) {
			return fmt.Errorf("%s contains the secret", p)
		}
		return nil
	})
	ts.Check(err)
	if n == 0 {
		ts.Fatalf("nosecret: no files under %s (the check would prove nothing)", args[1])
	}
}

// renderBackup matches the suffix of render's own backup names.
var renderBackup = regexp.MustCompile(`\.bak\.[0-9]{8}T[0-9]{6}\.[0-9]{6}Z$`)

// backups returns render's own backups of file (FILE.bak.<time>), oldest
// first; a user's FILE.bak.1 is not one.
func backups(ts *testscript.TestScript, file string) []string {
	all, err := filepath.Glob(ts.MkAbs(file) + ".bak.*")
	ts.Check(err)
	var out []string
	for _, m := range all {
		if renderBackup.MatchString(m) {
			out = append(out, m)
		}
	}
	return out
}

// bom FILE: put a UTF-8 byte order mark in front of FILE's bytes.
func cmdBOM(ts *testscript.TestScript, neg bool, args []string) {
	for _, a := range args {
		p := ts.MkAbs(a)
		b, err := os.ReadFile(p)
		ts.Check(err)
		ts.Check(os.WriteFile(p, append([]byte("\xef\xbb\xbf"), b...), 0o644))
	}
}

// bakcount FILE N: exactly N of render's FILE.bak.<time> backups exist.
func cmdBakCount(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: bakcount FILE N")
	}
	matches := backups(ts, args[0])
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	if len(matches) != want {
		ts.Fatalf("%d backups of %s, want %d: %v", len(matches), args[0], want, matches)
	}
}

// cmpbak FILE WANT: the newest FILE.bak.* has exactly WANT's bytes.
func cmdCmpBak(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: cmpbak FILE WANT")
	}
	matches := backups(ts, args[0])
	if len(matches) == 0 {
		ts.Fatalf("no backup of %s", args[0])
	}
	got, err := os.ReadFile(matches[len(matches)-1]) // names sort by time
	ts.Check(err)
	want, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	if !bytes.Equal(got, want) {
		ts.Fatalf("newest backup of %s differs from %s:\n%s", args[0], args[1], got)
	}
}

func hash(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// Exit status contract: 0 on success and degraded paths, 1 with --strict
// when a target was kept or skipped, 2 on usage errors.
func TestExitCodes(t *testing.T) {
	home := t.TempDir()
	t.Setenv("PATH", t.TempDir()) // no mempalace-mcp: R5, degraded but 0
	for _, k := range []string{"MEMPALACE_REMOTE_URL", "MEMPALACE_EDGE", "XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR"} {
		t.Setenv(k, "")
	}
	var out, errb bytes.Buffer
	cases := []struct {
		args []string
		want int
	}{
		{[]string{"render", "--home", home}, 0},
		{[]string{"render", "--home", home, "--strict"}, 0},
		// named, but mempalace-mcp nowhere: no entry, a skip (attack121 F1)
		{[]string{"render", "--home", home, "--target", "claude-code", "--strict"}, 1},
		{[]string{"render", "--target", "nope"}, 2},
		{[]string{"render", "--bogus"}, 2},
		{[]string{"render", "positional"}, 2},
		{[]string{"nosuchcommand"}, 2},
		{[]string{"version"}, 0},
	}
	for _, c := range cases {
		if got := run(c.args, &out, &errb); got != c.want {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, got, c.want, errb.String())
		}
	}
	errb.Reset()
	if run([]string{"render", "--home", home, "--target", "claude-code"}, &out, &errb); !strings.Contains(errb.String(), "mempalace-mcp is not on PATH") || !strings.Contains(errb.String(), "target=claude-code") {
		t.Errorf("render --target claude-code without mempalace-mcp says nothing of claude-code:\n%s", errb.String())
	}
	os.MkdirAll(filepath.Join(home, ".config", "opencode"), 0o755)
	os.WriteFile(filepath.Join(home, ".config", "opencode", "opencode.jsonc"), []byte("{ broken"), 0o644)
	if got := run([]string{"render", "--home", home}, &out, &errb); got != 0 {
		t.Errorf("a broken config must not fail the container start: exit %d", got)
	}
	if got := run([]string{"render", "--home", home, "--strict"}, &out, &errb); got != 1 {
		t.Errorf("--strict with a skipped target: exit %d, want 1", got)
	}
}
