package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

var (
	selfMu    sync.Mutex
	selfLinks = map[string]string{}
)

// Self returns the path of a link named name to the running test binary,
// made once per test process. A test binary whose TestMain dispatches on
// the name it was started under (fakepalace.MainIfLinked for
// "mempalace-mcp") is then that program without a build: the unit tier
// (go test -short) builds no binary.
func Self(t testing.TB, name string) string {
	t.Helper()
	selfMu.Lock()
	defer selfMu.Unlock()
	if p, ok := selfLinks[name]; ok {
		return p
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "devbox-config-self-")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.Symlink(exe, p); err != nil {
		t.Fatal(err)
	}
	selfLinks[name] = p
	return p
}

// smallStackEnv names the test a child of the test binary runs with its
// stack capped (InSmallStack).
const smallStackEnv = "TESTBED_SMALL_STACK"

// InSmallStack runs check in a child of the test binary whose goroutine
// stacks are capped at limit bytes, and fails t if the child fails or
// dies: a stack overflow is a fatal error, not a panic, so only a child
// process can show one. A cap below Go's 1 GB default stands for an
// input proportionally below the size the code under test accepts.
func InSmallStack(t *testing.T, limit int, check func(t *testing.T)) {
	t.Helper()
	if os.Getenv(smallStackEnv) == t.Name() {
		debug.SetMaxStack(limit)
		check(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$")
	cmd.Env = append(os.Environ(), smallStackEnv+"="+t.Name())
	if out, err := cmd.CombinedOutput(); err != nil {
		i := max(strings.Index(string(out), "fatal error"), 0)
		t.Fatalf("in a child with its stack capped at %d bytes: %v: %.300s", limit, err, out[i:])
	}
}
