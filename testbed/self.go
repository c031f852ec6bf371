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
	"time"
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
	removeStaleSelves()
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

// removeStaleSelves removes the link directories of earlier test
// processes whose binary is gone (go test deletes it after the run):
// nothing else would, and they piled up in the temporary directory, one
// per test binary run. One whose binary is still there (a run going on),
// or made in the last minute, is left.
func removeStaleSelves() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "devbox-config-self-*")) // a bad pattern cannot happen: it is constant
	for _, dir := range dirs {
		links, _ := filepath.Glob(filepath.Join(dir, "*")) // as above
		info, err := os.Stat(dir)
		// One just made may not hold its link yet (another test process
		// between its MkdirTemp and Symlink): left for a minute.
		stale := err == nil && time.Since(info.ModTime()) > time.Minute
		for _, l := range links {
			if _, err := os.Stat(l); err == nil { // follows the link: its binary is there
				stale = false
			}
		}
		if stale {
			os.RemoveAll(dir) // another process may remove it first: nothing to report
		}
	}
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
