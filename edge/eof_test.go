package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// The agent's side of a piped conversation, a line each: the requests,
// then EOF.
const (
	pipedInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n"
	pipedList       = `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	pipedStatus     = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mempalace_status","arguments":{}}}` + "\n"
	pipedCalls      = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"w","room":"r","content":"piped, then EOF"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":"five","method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"piped"}}}` + "\n"
)

// runPiped runs `devbox-config edge` with stdin a pipe that holds lines
// and then ends, as `printf ... | devbox-config edge` does; it returns
// what the edge wrote to stdout and stderr and how long it ran.
func runPiped(t *testing.T, env []string, lines string, timeout time.Duration) (stdout, stderr string, took time.Duration) {
	t.Helper()
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "edge")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMPALACE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(lines)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	began := time.Now()
	err := cmd.Run()
	took = time.Since(began)
	if err != nil {
		t.Fatalf("edge: %v (after %s)\nstdout:\n%s\nstderr:\n%s", err, took, o.String(), e.String())
	}
	return o.String(), e.String(), took
}

// answers checks that every line of out is one JSON-RPC 2.0 message
// (stdout carries only MCP) and returns the answers by id.
func answers(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	got := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["jsonrpc"] != "2.0" {
			t.Fatalf("stdout carries a line that is not a JSON-RPC message: %q (%v)", line, err)
		}
		if id, ok := m["id"]; ok && m["method"] == nil {
			got[fmt.Sprint(id)] = m
		}
	}
	return got
}

// wantAnswered fails unless each id has a result that is not an error.
func wantAnswered(t *testing.T, got map[string]map[string]any, out string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		res, _ := got[id]["result"].(map[string]any)
		if res == nil || res["isError"] == true {
			t.Errorf("request %s: no result before exit: %v\nstdout:\n%s", id, got[id], out)
		}
	}
}

// A pipe of requests closed at once is a whole conversation: the edge
// answers every request it read before EOF, each in one well-formed
// JSON-RPC line on stdout, then exits 0; the write it took is in the
// local palace and its outbox.
func TestPipedRequestsAnsweredBeforeEOF(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	child := testbed.Self(t, fakepalace.ProgramName)

	t.Run("initialize alone, pass-through", func(t *testing.T) {
		palace := filepath.Join(t.TempDir(), "palace")
		out, errOut, _ := runPiped(t, []string{"MEMPALACE_EDGE_CHILD=" + child, "MEMPALACE_PALACE_PATH=" + palace}, pipedInitialize, 30*time.Second)
		wantAnswered(t, answers(t, out), out, "1")
		if t.Failed() {
			t.Logf("stderr:\n%s", errOut)
		}
	})

	t.Run("handshake, list and calls, with a primary", func(t *testing.T) {
		_, srv := startPrimary(t)
		palace := filepath.Join(t.TempDir(), "palace")
		out, errOut, _ := runPiped(t, []string{"MEMPALACE_EDGE_CHILD=" + child, "MEMPALACE_PALACE_PATH=" + palace,
			"MEMPALACE_REMOTE_URL=" + srv.URL(), "MEMPALACE_REMOTE_TOKEN=" + testToken, "MEMPALACE_EDGE_TIMEOUT=5s"},
			pipedInitialize+pipedList+pipedStatus+pipedCalls, 60*time.Second)
		got := answers(t, out)
		wantAnswered(t, got, out, "1", "2", "3", "4", "five")
		res, _ := got["2"]["result"].(map[string]any)
		if tools, _ := res["tools"].([]any); len(tools) == 0 {
			t.Errorf("tools/list answered no tools: %v", got["2"])
		}
		if !strings.Contains(fmt.Sprint(got["4"]), "drawer_w_r_") {
			t.Errorf("add_drawer: %v", got["4"])
		}
		if strings.Contains(out+errOut, testToken) {
			t.Error("the token appears in the edge's output")
		}
		wantWriteKept(t, palace)
		if t.Failed() {
			t.Logf("stderr:\n%s", errOut)
		}
	})
}

// wantWriteKept fails unless the piped add_drawer is in the local palace
// and in the outbox (queued, in flight or sent, never dead).
func wantWriteKept(t *testing.T, palace string) {
	t.Helper()
	st, err := fakepalace.ReadDump(palace)
	if err != nil || len(st.Drawers) != 1 {
		t.Errorf("the local palace does not hold the piped write: %v %v", err, st)
	}
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatalf("outbox: %v", err)
	}
	defer ob.Close()
	ops, err := ob.List(context.Background(), 100, outbox.Queued, outbox.Inflight, outbox.Done, outbox.Dead)
	if err != nil {
		t.Fatalf("outbox: %v", err)
	}
	if len(ops) != 1 || ops[0].Tool != "mempalace_add_drawer" || ops[0].State == outbox.Dead {
		t.Errorf("outbox after the early exit: %+v", ops)
	}
}

// The same conversation with the edge in-process (under -race): the
// agent's input ends right after the last request, and every answer is
// written before Serve returns.
func TestPipedRequestsAnsweredBeforeEOFInProcess(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true})
	if _, err := io.WriteString(h.in, pipedInitialize+pipedList+pipedStatus+pipedCalls); err != nil {
		t.Fatal(err)
	}
	h.in.(io.Closer).Close()
	var lines []string
	deadline := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case m, ok := <-h.lines:
			if !ok {
				done = true
				break
			}
			b, _ := json.Marshal(m)
			lines = append(lines, string(b))
		case <-deadline:
			t.Fatalf("the edge did not stop after its input ended; got:\n%s", strings.Join(lines, "\n"))
		}
	}
	out := strings.Join(lines, "\n")
	wantAnswered(t, answers(t, out), out, "1", "2", "3", "4", "five")
	wantWriteKept(t, h.palace)
}

// A call the child never answers does not keep the edge: after EOF it
// waits at most the call timeout (plus drainGrace), answers what it can
// and exits 0.
func TestPipedEOFBoundedByCallTimeout(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	child := testbed.Self(t, fakepalace.ProgramName)
	palace := filepath.Join(t.TempDir(), "palace")
	out, errOut, took := runPiped(t, []string{"MEMPALACE_EDGE_CHILD=" + child, "MEMPALACE_PALACE_PATH=" + palace,
		"MEMPALACE_EDGE_TIMEOUT=1s", "FAKEPALACE_LATENCY_MS=mempalace_status=120000"},
		pipedInitialize+pipedList+pipedStatus, 60*time.Second)
	got := answers(t, out)
	wantAnswered(t, got, out, "1", "2")
	if took > 20*time.Second {
		t.Errorf("the edge took %s to exit with a hung call (bound: 1s + 1s)", took)
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", errOut)
	}
}

// TestPipedEOFWaitsForASlowLocalPalace: the local palace takes 3 s to
// start (longer than the call timeout) and the agent's requests and EOF
// arrive at once. tools/list and tools/call wait for the first tool list
// (toolsWait), so the drain waits as long: every request is answered with
// the palace's real answer (before, the edge gave up after the call
// timeout and answered none of them; attacker pass).
func TestPipedEOFWaitsForASlowLocalPalace(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	child := testbed.Self(t, fakepalace.ProgramName)
	slow := filepath.Join(t.TempDir(), "slow-mempalace-mcp")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 3\nexec "+child+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	palace := filepath.Join(t.TempDir(), "palace")
	out, errOut, _ := runPiped(t, []string{"MEMPALACE_EDGE_CHILD=" + slow, "MEMPALACE_PALACE_PATH=" + palace, "MEMPALACE_EDGE_TIMEOUT=1s"},
		pipedInitialize+pipedList+pipedStatus, 60*time.Second)
	got := answers(t, out)
	wantAnswered(t, got, out, "1", "2", "3")
	res, _ := got["2"]["result"].(map[string]any)
	if tools, _ := res["tools"].([]any); len(tools) == 0 {
		t.Errorf("tools/list answered without the palace's tools: %v", got["2"])
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", errOut)
	}
}
