package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// Second round of attacks on the start memo (render/memo).

// copyFile copies src to dst with mode 0755.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// otherBuild writes to dst a copy of bin whose Go build ID differs (one
// character of it changed, same size): by the memo's own rule another
// build, which must plan again.
func otherBuild(t *testing.T, bin, dst string) {
	t.Helper()
	id := buildIDOf(t, bin)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(id))
	if i < 0 || len(id) < 2 {
		t.Fatalf("build ID %q not found in %s", id, bin)
	}
	last := len(id) - 1
	if b[i+last] == 'A' {
		b[i+last] = 'B'
	} else {
		b[i+last] = 'A'
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := buildIDOf(t, dst); got == id {
		t.Fatalf("patched build ID is still %q", got)
	}
}

// Finding A: the binary replaced while a start runs. The memo is saved at
// the end of the run, and Save identifies "the running executable" by
// os.Executable(), which on Linux is /proc/self/exe with " (deleted)"
// trimmed: once the file was replaced (an upgrade renames a new build over
// it), that is the path of the NEW file, and Save stats and reads the build
// ID of the new file. The memo then says the new build made it, and the
// new build's next start is answered from what the old build printed and
// decided: another build does not plan again (a release that renders a
// config differently never does until some input changes). The same holds
// for Check (an old process whose binary was replaced takes the new
// build's memo).
func TestAttack2BinaryReplacedDuringAStartLabelsTheMemoWithTheNewBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "devbox-config")
	copyFile(t, testbed.Build(t, "./cmd/devbox-config", "devbox-config"), bin)
	next := filepath.Join(dir, "devbox-config.new")
	otherBuild(t, bin, next)
	home, env := attackHome(t, bin)
	os.Remove(memoPath(home))

	// A no-change start of the old build; the upgrade lands while it runs
	// (the process is held stopped at its exec, under ptrace, so the
	// replacement is surely before its Save).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(bin, "render", "--home", home)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot ptrace here: %v", err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(cmd.Process.Pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		t.Fatalf("child not stopped at exec: %v %v", err, ws)
	}
	if err := os.Rename(next, bin); err != nil {
		t.Fatal(err)
	}
	if err := syscall.PtraceDetach(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("start during the upgrade: %v\n%s", err, stderr.String())
	}
	m, err := os.ReadFile(memoPath(home))
	if err != nil {
		t.Fatalf("the no-change start saved no memo: %v", err)
	}
	newID := buildIDOf(t, bin)
	r := runRender(t, bin, home, env, "--home", home)
	if r.answered {
		line, _, _ := strings.Cut(strings.SplitN(string(m), "\n", 3)[1], "\n")
		t.Errorf("the new build's first start was answered from a memo the old build recorded; the memo names the new build:\n%s\n(new build ID %s)", line, newID)
	}
}
