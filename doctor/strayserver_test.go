package doctor

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/ladder"
)

// A mempalace-mcp serving the edge's palace that no devbox-config edge
// started (a harness session begun in solitary mode, still running once
// edge mode is on; one an older edge left) holds MemPalace's one writer
// slot: doctor names it, its pid and the fix (stray-server). The edge's
// own server, its child, is never named. (Before, doctor said nothing
// of either.)
func TestAServerNoEdgeStartedIsNamedNotTheEdgesOwn(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc")
	}
	b := newBox(t)
	b.edgeMode("http://127.0.0.1:9/mcp", "a-token-of-some-length")
	st, fs := resolve(b.opts.withDefaults())
	if len(fs) > 0 || st.Settings.Mode != ladder.Edge {
		t.Fatalf("not in edge mode: %+v %+v", st.Settings, fs)
	}
	// Scripts, as mempalace-mcp is one (Python's): the server says it runs,
	// then waits for its input to close; the edge runs it as its child.
	bin := t.TempDir()
	write(t, filepath.Join(bin, "mempalace-mcp"), "#!/bin/sh\necho serving\nread line\n", 0o755)
	write(t, filepath.Join(bin, "devbox-config"), "#!/bin/sh\n\"$(dirname \"$0\")/mempalace-mcp\"\nexit $?\n", 0o755)
	env := append(os.Environ(), "MEMPALACE_PALACE_PATH="+b.palace)

	runServing(t, env, filepath.Join(bin, "devbox-config"), "edge")
	if fs := CheckStrayServer(b.opts, st); len(fs) > 0 {
		t.Fatalf("the edge's own server is named: %+v", fs)
	}
	stray := runServing(t, env, filepath.Join(bin, "mempalace-mcp"))
	fs = CheckStrayServer(b.opts, st)
	if len(fs) != 1 {
		t.Fatalf("a server no edge started: %+v", fs)
	}
	pid := strconv.Itoa(stray)
	if f := fs[0]; f.ID != IDStrayServer || f.Severity != Warn || !strings.Contains(f.Message, "pid "+pid+" serves "+b.palace) ||
		!strings.Contains(f.Message, "its parent is pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(f.Fix, "kill "+pid) {
		t.Errorf("stray-server: %+v", f)
	}
}

// runServing starts argv with env and returns its pid once it (or its
// child) says "serving"; its input closes at the test's end.
func runServing(t *testing.T, env []string, argv ...string) int {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	in, err := cmd.StdinPipe()
	must(t, err)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil && err != io.EOF || line != "serving\n" {
		t.Fatalf("%v: %q, %v", argv, line, err)
	}
	return cmd.Process.Pid
}
