package fakepalace_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// TestREADMEFakeFleetRecipe runs the fake-fleet block of docs/development.md
// ("The fake fleet") as a newcomer pastes it, on a fresh HOME where ~/bin does not
// exist and is not on PATH. Only /tmp/ (a private directory here) and the
// two ports (free ones here) are changed, so parallel runs do not collide.
func TestREADMEFakeFleetRecipe(t *testing.T) {
	testbed.Integration(t, "builds fakepalace and starts two primaries")
	for _, bin := range []string{"bash", "curl", "go"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not on PATH", bin)
		}
	}
	readme, err := os.ReadFile("../docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	const opening = "```sh\ngo build -o /tmp/fakepalace ./cmd/fakepalace\n"
	s := string(readme)
	i := strings.Index(s, opening)
	if i < 0 {
		t.Fatalf("docs/development.md has no block starting %q", opening)
	}
	block, _, ok := strings.Cut(s[i+len("```sh\n"):], "```\n")
	if !ok {
		t.Fatal("docs/development.md: the fake-fleet block is not closed")
	}
	tmp, home := t.TempDir(), t.TempDir()
	script := strings.NewReplacer("/tmp/", tmp+"/", "127.0.0.1:8765", "127.0.0.1:"+strconv.Itoa(testbed.FreePort(t)), "127.0.0.1:8766", "127.0.0.1:"+strconv.Itoa(testbed.FreePort(t))).Replace(block)
	if err := os.WriteFile(filepath.Join(tmp, "recipe.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-eu", filepath.Join(tmp, "recipe.sh"))
	cmd.Dir = ".."
	// a fresh HOME, but the Go caches this test already has (a newcomer's
	// first build downloads and compiles the modules once; that is not
	// what this test is about)
	cmd.Env = append(os.Environ(), "HOME="+home)
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		val, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, v+"="+strings.TrimSpace(string(val)))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // a primary the recipe failed to stop
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("the recipe did not finish in 3 minutes (a primary left in the foreground?):\n%s", out)
	}
	if err != nil {
		t.Fatalf("docs/development.md's fake-fleet recipe fails as written on a fresh HOME: %v\n%s", err, out)
	}
	for _, want := range []string{`{"ok":true}`, `"drawers"`, "listening on http://127.0.0.1:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the recipe's output lacks %q:\n%s", want, out)
		}
	}
	if target, err := os.Readlink(filepath.Join(home, "bin", "mempalace-mcp")); err != nil || target != filepath.Join(tmp, "fakepalace") {
		t.Errorf("~/bin/mempalace-mcp = %q, %v; want a link to the built fakepalace", target, err)
	}
}
