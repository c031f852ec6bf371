package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// upstream is what a test gateway sits in front of: the MemPalace test
// double, or the Python shim (testdata/pyupstream.py) that parses JSON
// and query strings as MemPalace's Python server does and records what it
// received.
type upstream struct {
	name   string
	url    string             // the /mcp endpoint
	palace *fakepalace.Palace // the double; nil for the shim
	base   string             // the shim's base URL
}

func startFake(t testing.TB) *upstream {
	t.Helper()
	pl, up := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: upstreamToken})
	return &upstream{name: "fakepalace", url: up.URL(), palace: pl}
}

func startPython(t testing.TB) *upstream {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not on PATH")
	}
	cmd := exec.Command("python3", "testdata/pyupstream.py")
	out, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	port, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("python shim did not start: %v %s", err, stderr.String())
	}
	base := "http://127.0.0.1:" + strings.TrimSpace(port)
	return &upstream{name: "python", url: base + "/mcp", base: base}
}

// forEachUpstream runs a finding's test in front of both upstreams.
func forEachUpstream(t *testing.T, fn func(t *testing.T, u *upstream)) {
	for _, start := range []func(testing.TB) *upstream{startFake, startPython} {
		u := start(t)
		t.Run(u.name, func(t *testing.T) { fn(t, u) })
	}
}

// pyRecord is one message the shim received, as Python parsed it.
type pyRecord struct {
	Path      string            `json:"path"`
	Method    string            `json:"method"`
	Name      string            `json:"name"`
	Arguments map[string]any    `json:"arguments"`
	Query     map[string]string `json:"query"`
}

// received lists what the shim received (nil for the double).
func (u *upstream) received(t testing.TB) []pyRecord {
	t.Helper()
	if u.base == "" {
		return nil
	}
	resp, err := http.Get(u.base + "/_received")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rs []pyRecord
	json.NewDecoder(resp.Body).Decode(&rs)
	return rs
}

// toolCalls counts the calls of tool (bare name) the upstream executed.
func (u *upstream) toolCalls(t testing.TB, tool string) int {
	t.Helper()
	if u.palace != nil {
		return u.palace.Calls("mempalace_" + tool)
	}
	n := 0
	for _, r := range u.received(t) {
		if r.Method == "tools/call" && strings.TrimPrefix(r.Name, "mempalace_") == tool {
			n++
		}
	}
	return n
}
