package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// builds holds the binaries Build made in this test process: one
// directory, removed when the tests have run (RemovingBuilds). It is the
// process's own cache, so it is package state by nature; armed says a
// TestMain runs the tests through RemovingBuilds, without which every run
// would leave its binaries (16-29 MB each) in the temporary directory.
var builds struct {
	sync.Mutex
	armed bool
	dir   string
	paths map[string]string
}

// TestingM is what a TestMain hands on: *testing.M, and what goleak and
// testscript accept in its place.
type TestingM interface{ Run() int }

type removingBuilds struct{ m TestingM }

// RemovingBuilds wraps a TestMain's m so that the binaries Build makes
// during the tests are removed once they have run. Every package whose
// tests call Build runs its tests through it:
//
//	func TestMain(m *testing.M) { os.Exit(testbed.RemovingBuilds(m).Run()) }
func RemovingBuilds(m TestingM) TestingM {
	builds.Lock()
	builds.armed = true
	builds.Unlock()
	return removingBuilds{m}
}

func (r removingBuilds) Run() int {
	code := r.m.Run()
	builds.Lock()
	defer builds.Unlock()
	if builds.dir != "" {
		// A binary still running (a child a test left) keeps its inode;
		// the name goes regardless, and nothing else reads the directory.
		if err := os.RemoveAll(builds.dir); err != nil {
			os.Stderr.WriteString("testbed: removing the test binaries: " + err.Error() + "\n")
		}
		builds.dir, builds.paths = "", nil
	}
	return code
}

// Build compiles a main package of this module once per test process and
// returns the binary's path. name is the file name (e.g. "mempalace-mcp").
// The package's TestMain must run its tests through RemovingBuilds.
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	notInUnitTier(t, "a binary build ("+pkg+")")
	builds.Lock()
	defer builds.Unlock()
	if !builds.armed {
		t.Fatal("testbed.Build: this package's TestMain does not run its tests through testbed.RemovingBuilds, so the binaries would be left in " + os.TempDir())
	}
	key := pkg + "\x00" + name
	if p, ok := builds.paths[key]; ok {
		return p
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "devbox-config-bin-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir, builds.paths = dir, map[string]string{}
	}
	// Each binary in a directory of its own: its file name is the one
	// asked for (a program may read it from argv[0]), whatever else is built.
	sub := filepath.Join(builds.dir, strconv.Itoa(len(builds.paths)))
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(sub, name)
	// Built as releases are (scripts/build): static, no cgo.
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	builds.paths[key] = out
	return out
}
