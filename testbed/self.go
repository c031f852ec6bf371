package testbed

import (
	"os"
	"path/filepath"
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
