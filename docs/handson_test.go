package docs

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// handsOnHeading is the README section TestREADMEHandsOn runs.
const handsOnHeading = "## Five minutes with a fake fleet"

// step is one line of the hands-on that says what it prints
// (`command   # -> text`).
type step struct {
	line, want string
}

var expectRE = regexp.MustCompile(`^(.*\S)\s+# -> (.+)$`)

// handsOn returns the shell blocks of the README's hands-on section, in
// order, and the lines among them that say what they print.
func handsOn(t *testing.T, readme string) (blocks []string, steps []step) {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n"+handsOnHeading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", handsOnHeading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for {
		_, rest, ok := strings.Cut(section, "```sh\n")
		if !ok {
			break
		}
		block, after, ok := strings.Cut(rest, "```\n")
		if !ok {
			t.Fatal("README.md: a hands-on block is not closed")
		}
		blocks, section = append(blocks, block), after
		for _, l := range strings.Split(block, "\n") {
			if m := expectRE.FindStringSubmatch(l); m != nil {
				if strings.HasSuffix(m[1], "\\") || strings.HasSuffix(m[1], "|") {
					t.Fatalf("README.md: %q says what it prints but continues on the next line", l)
				}
				steps = append(steps, step{line: l, want: m[2]})
			}
		}
	}
	if len(blocks) == 0 || len(steps) == 0 {
		t.Fatalf("README.md's %q section has %d shell blocks and %d lines saying what they print", handsOnHeading, len(blocks), len(steps))
	}
	return blocks, steps
}

// TestREADMEHandsOn follows the README's hands-on as a newcomer does: a
// fresh clone of this repository (the committed tree plus any uncommitted
// edits, so a change is tested before its commit), a fresh HOME, the
// blocks pasted in order into one bash. Only the two ports are swapped for
// free ones, and Go's caches are shared (a newcomer's first build downloads
// and compiles the modules once; that is not what this test is about).
// Every line that says what it prints (`# -> text`) must print it; nothing
// logs an error; no file holds a device token; nothing but ~/bin and
// ~/fleet is written (the dry run included); and the fleet is gone when the
// last block has run.
func TestREADMEHandsOn(t *testing.T) {
	testbed.Integration(t, "clones the repository, builds both binaries and runs a fleet")
	for _, bin := range []string{"bash", "curl", "git", "go"} {
		if _, err := exec.LookPath(bin); err != nil {
			testbed.Missing(t, bin+" is not on PATH")
		}
	}
	clone := freshClone(t)
	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, steps := handsOn(t, string(readme))

	ports := map[string]string{"127.0.0.1:8765": "127.0.0.1:" + strconv.Itoa(testbed.FreePort(t)), "127.0.0.1:8766": "127.0.0.1:" + strconv.Itoa(testbed.FreePort(t))}
	var script strings.Builder
	n := 0
	for _, block := range blocks {
		for _, l := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
			for from, to := range ports {
				l = strings.ReplaceAll(l, from, to)
			}
			if expectRE.MatchString(l) {
				fmt.Fprintf(&script, "echo '@@begin %d'\n%s\necho '@@end %d'\n", n, l, n)
				n++
				continue
			}
			script.WriteString(l + "\n")
		}
	}
	// Afterwards: the device tokens, to look for them in every file.
	script.WriteString("printf '@@token %s\\n' \"$LAPTOP\" \"$DESKTOP\"\n")
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tmp, "hands-on.sh")
	if err := os.WriteFile(path, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("bash", "-eu", "-o", "pipefail", path)
	cmd.Dir = clone
	cmd.Env = newcomerEnv(t, home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second // a server left running keeps the output open; the port check below names it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // a server the blocks failed to stop
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(5 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("the hands-on did not finish in 5 minutes:\n%s", out.String())
	}
	transcript := out.String()
	t.Logf("the hands-on, as run:\n%s", transcript)
	switch {
	case errors.Is(err, exec.ErrWaitDelay):
		t.Errorf("a process the blocks started outlived them (a server left running)")
	case err != nil:
		t.Fatalf("the README's hands-on fails as written in a fresh clone with a fresh HOME: %v (transcript above)", err)
	}

	for i, s := range steps {
		_, rest, _ := strings.Cut(transcript, fmt.Sprintf("@@begin %d\n", i))
		printed, _, ok := strings.Cut(rest, fmt.Sprintf("@@end %d\n", i))
		if !ok {
			t.Errorf("step %d (%s) did not run", i, s.line)
		} else if !strings.Contains(printed, s.want) {
			t.Errorf("README.md says\n\t%s\nprints %q; it printed:\n%s", s.line, s.want, printed)
		}
	}
	if strings.Contains(transcript, "level=ERROR") {
		t.Errorf("the hands-on logged an error (transcript above)")
	}
	var tokens []string
	for _, l := range strings.Split(transcript, "\n") {
		if tok, ok := strings.CutPrefix(l, "@@token "); ok {
			tokens = append(tokens, tok)
		}
	}
	if len(tokens) != 2 || !strings.HasPrefix(tokens[0], "dbx_") || !strings.HasPrefix(tokens[1], "dbx_") {
		t.Fatalf("the device tokens were not issued: %q", tokens)
	}
	for _, tok := range tokens {
		testbed.NoFileContains(t, home, tok)
	}
	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	var wrote []string
	for _, e := range entries {
		if e.Name() == ".config" {
			if sub, _ := os.ReadDir(filepath.Join(home, ".config")); len(sub) == 1 && sub[0].Name() == "go" {
				continue // the go command's own telemetry counters
			}
		}
		wrote = append(wrote, e.Name())
	}
	if strings.Join(wrote, " ") != "bin fleet" {
		t.Errorf("the README says the hands-on writes only ~/bin and ~/fleet; the HOME holds %q", wrote)
	}
	for _, addr := range ports {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after the last block: a server was left running", addr)
		}
	}
}

// freshClone clones the repository this test runs in and lays the working
// tree's uncommitted edits over it (changed and new files, deletions), so
// the clone holds exactly what the next commit would.
func freshClone(t *testing.T) string {
	t.Helper()
	top, err := exec.Command("git", "-C", "..", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		testbed.Missing(t, "not a git checkout: "+err.Error())
	}
	root := strings.TrimSpace(string(top))
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "devbox-config")
	git := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command("git", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	git("clone", "--quiet", "--no-checkout", root, clone)
	git("-C", clone, "checkout", "--quiet", "--detach", strings.TrimSpace(string(head)))
	changed := git("-C", root, "ls-files", "-z", "--modified", "--others", "--deleted", "--exclude-standard")
	for _, rel := range strings.Split(strings.TrimRight(string(changed), "\x00"), "\x00") {
		if rel == "" {
			continue
		}
		src, dst := filepath.Join(root, rel), filepath.Join(clone, rel)
		b, err := os.ReadFile(src)
		if os.IsNotExist(err) {
			os.Remove(dst)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return clone
}

// newcomerEnv is this process's environment as a newcomer's shell would
// have it: no MEMPALACE_* or XDG_* variables, HOME the fresh one, and Go's
// caches where this test's Go keeps them.
func newcomerEnv(t *testing.T, home string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "MEMPALACE_"), strings.HasPrefix(name, "XDG_"), strings.HasPrefix(name, "PI_"),
			name == "HOME", name == "GOCACHE", name == "GOMODCACHE", name == "GOPATH":
			continue
		}
		env = append(env, kv)
	}
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		val, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(val)))
	}
	return append(env, "HOME="+home)
}
