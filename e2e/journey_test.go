package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
	"github.com/joakimp/devbox-config/testbed/mockmodel"
)

const token = "tok-SECRET-journey-4711"

type journey struct {
	t       *testing.T
	h       *testbed.Home
	oc, bin string
	mock    *mockmodel.Model
	palace  string
	cfg     string
	primary *fakepalace.Palace
	srv     *fakepalace.HTTPServer
	// trace is every message the primary received (fakepalace.SetTrace),
	// shown when a run offers the model no palace tool.
	trace *testbed.SyncBuffer
	steps []string
}

// check records one line of the transcript and stops at the first failure.
func (j *journey) check(step, what string, ok bool, detail ...any) {
	j.t.Helper()
	res := "PASS"
	if !ok {
		res = "FAIL"
	}
	line := fmt.Sprintf("%-9s %-78s %s", step, what, res)
	j.steps = append(j.steps, line)
	j.t.Log(line)
	if !ok {
		j.t.Fatalf("%s: %s: %v", step, what, fmt.Sprint(detail...))
	}
}

func (j *journey) setEnv(kv map[string]string) {
	for _, k := range []string{"MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE", "MEMPALACE_ORIGIN_LABEL"} {
		j.h.Setenv(k, kv[k])
	}
}

// render runs the entrypoint's line; it returns render's stderr.
func (j *journey) render(args ...string) string {
	j.t.Helper()
	_, errOut, err := j.h.Run(j.t, 30*time.Second, j.bin, append([]string{"render"}, args...)...)
	if err != nil {
		j.t.Fatalf("render: %v\n%s", err, errOut)
	}
	return errOut
}

// checkConnected checks that opencode lists mempalace as connected (a
// failed first answer is asked once more, testbed.OpencodeMCPStatus, and
// the transcript says so).
func (j *journey) checkConnected(step, what string) {
	j.t.Helper()
	status, printed, retried := testbed.OpencodeMCPStatus(j.t, j.h, j.oc, "mempalace")
	if retried {
		j.t.Logf("%-9s opencode mcp list did not say connected at first; asked once more", step)
	}
	j.check(step, what, status == "connected", "status ", status, "; opencode mcp list printed:\n", printed)
}

// run makes opencode call one tool through the mock model and returns the
// tool's result text as opencode passed it back to the model. A run that
// offers the model no palace tool fails the step with opencode's own log
// (--print-logs) and what the primary received meanwhile: opencode drops a
// server whose tools/list failed without a word (the remote step's old
// flake, docs/harnesses.md: opencode's Bun and Connection: close).
func (j *journey) run(tool string, args map[string]any) string {
	j.t.Helper()
	j.mock.Next(mockmodel.ToolCall{Name: "mempalace_mempalace_" + tool, Args: args})
	mark := len(j.trace.String())
	out, errOut, err := j.h.Run(j.t, 120*time.Second, j.oc, "run", "--print-logs", "--log-level", "DEBUG", "please use memory")
	if err != nil || !strings.Contains(out, "MOCK DONE") {
		j.t.Fatalf("opencode run (%s): %v\nstdout:\n%s\nstderr:\n%s", tool, err, out, errOut)
	}
	if len(mempalaceTools(j.mock.Offered())) == 0 {
		j.t.Fatalf("opencode run (%s) offered the model no mempalace tool.\nopencode's log:\n%s\nthe primary received meanwhile:\n%s", tool, errOut, j.trace.String()[mark:])
	}
	return j.mock.LastToolResult()
}

func (j *journey) local() *fakepalace.State {
	st, err := fakepalace.ReadDump(j.palace)
	if err != nil {
		j.t.Fatal(err)
	}
	return st
}

func mempalaceTools(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "mempalace_mempalace_") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// TestJourney is the R1 acceptance test and every rung after it, in the
// order a user flips .env and restarts a container.
func TestJourney(t *testing.T) {
	testbed.Integration(t, "the opencode journey: the real client from npm, the binaries built")
	oc := testbed.Opencode(t)
	h := testbed.NewHome(t)
	j := &journey{t: t, h: h, oc: oc, trace: &testbed.SyncBuffer{}}
	j.bin = testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	h.Link(t, j.bin, "devbox-config")
	h.Link(t, testbed.Build(t, "./cmd/fakepalace", "mempalace-mcp"), "mempalace-mcp")
	j.palace = filepath.Join(h.Dir, ".config", "mempalace", "palace") // MemPalace 3.11's on a fresh HOME, the edge's too
	j.mock = mockmodel.Start(t)
	// The user's own opencode config: the mock model, no MemPalace yet.
	j.cfg = filepath.Join(h.Dir, ".config", "opencode", "opencode.jsonc")
	os.MkdirAll(filepath.Dir(j.cfg), 0o755)
	os.WriteFile(j.cfg, []byte(`{
  "$schema": "https://opencode.ai/config.json",
  // my model
  "model": "mock/mock-1",
  "small_model": "mock/mock-1",
  "provider": {
    "mock": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Mock",
      "options": {"baseURL": "`+j.mock.URL+`/v1", "apiKey": "x"},
      "models": {"mock-1": {"name": "Mock 1", "tool_call": true}}
    }
  }
}
`), 0o644)

	// 1. Solitary: no MEMPALACE_* at all (R1).
	j.render()
	j.check("solitary", "render writes the local stdio entry", strings.Contains(read(j.cfg), `"command": ["mempalace-mcp"]`), read(j.cfg))
	j.checkConnected("solitary", "opencode mcp list: mempalace connected")
	res := j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "solitary drawer from opencode"})
	j.check("solitary", "the model's add_drawer lands in the local palace", j.local().CountContent("solitary drawer from opencode") == 1, res)
	j.run("diary_write", map[string]any{"agent_name": "opencode", "entry": "solitary diary from opencode"})
	j.check("solitary", "the model's diary write lands in the local palace", j.local().CountContent("solitary diary from opencode") == 1)
	serve := j.serve()
	tree := processTree(serve.Pid())
	j.check("solitary", "opencode runs mempalace-mcp, and no devbox-config process exists", hasCmd(tree, "mempalace-mcp") && !hasCmd(tree, "devbox-config") && !anyProcess(j.bin, filepath.Join(h.Bin, "devbox-config")), tree)
	j.check("solitary", "the MemPalace server opened no network socket", noSockets(tree, "mempalace-mcp"), tree)
	serve.Stop()
	_, err := os.Stat(filepath.Join(j.palace, "edge"))
	j.check("solitary", "no <palace>/edge/ exists", os.IsNotExist(err))

	// 2. Remote: URL and token in .env, restart.
	j.primary, j.srv = testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: token})
	fakepalace.SetTrace(j.primary, j.trace)
	j.setEnv(map[string]string{"MEMPALACE_REMOTE_URL": j.srv.URL(), "MEMPALACE_REMOTE_TOKEN": token})
	j.render()
	j.check("remote", "render switches the entry to the primary", strings.Contains(read(j.cfg), `"type": "remote"`), read(j.cfg))
	j.checkConnected("remote", "opencode mcp list: mempalace connected (to the primary)")
	res = j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "remote drawer straight to the primary"})
	j.check("remote", "a write goes straight to the primary", j.primary.Dump().CountContent("remote drawer straight to the primary") == 1,
		"the tool result the model saw: ", res, "; mempalace tools offered: ", len(mempalaceTools(j.mock.Offered())))
	found, nread := testbed.FilesContaining(h.Dir, token)
	j.check("remote", "the token is in no file on disk", len(found) == 0 && nread > 0, found)

	// 3. Edge: MEMPALACE_EDGE=1, restart. Another device already wrote to
	// the primary; a long-running opencode (the TUI) keeps an edge alive.
	j.setEnv(map[string]string{"MEMPALACE_REMOTE_URL": j.srv.URL(), "MEMPALACE_REMOTE_TOKEN": token, "MEMPALACE_EDGE": "1", "MEMPALACE_ORIGIN_LABEL": "journey-box"})
	j.render()
	j.check("edge", "opencode's server command is the edge", strings.Contains(read(j.cfg), `"command": ["devbox-config", "edge"]`), read(j.cfg))
	j.primaryCall("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "journey note from another device"})
	serve = j.serve()
	defer serve.Stop()
	j.checkConnected("edge", "opencode mcp list: mempalace connected (through the edge)")
	j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "journey note written in edge mode"})
	j.check("edge", "the write lands locally", j.local().CountContent("journey note written in edge mode") == 1)
	j.check("edge", "and on the primary", eventually(func() bool { return j.primary.Dump().CountContent("journey note written in edge mode") == 1 }))
	res = j.run("search", map[string]any{"query": "journey note", "limit": 10})
	j.check("edge", "a search returns hits from both palaces", strings.Contains(res, `"palace": "primary"`) && strings.Contains(res, "another device") && strings.Contains(res, "written in edge mode"), res)
	toolsOnline := mempalaceTools(j.mock.Offered())
	// RFC 003 §6's positive control: a synthetic sender asks this agent
	// (opencode@journey-box) something; the model's mailbox shows it.
	j.primaryCall("event_append", map[string]any{"type": "task.request", "stream": "journey", "room": "r", "from_agent": "pi@laptop",
		"to_agent": "opencode@journey-box", "status": "open", "body": "please review the journey patch"})
	j.primaryCall("event_append", map[string]any{"type": "note", "stream": "journey", "room": "r", "from_agent": "pi@laptop", "to_agent": "*", "body": "a broadcast owes nobody"})
	res = j.run("mailbox", map[string]any{})
	j.check("edge", "the model's mailbox shows the one ask addressed to it", strings.Contains(res, "please review the journey patch") && strings.Contains(res, `"count": 1`) && !strings.Contains(res, "a broadcast owes nobody"), res)
	// Issue 28: the next session's model is told of the ask in its context
	// before it calls any tool (the edge's server instructions, which
	// opencode puts into its system prompt; the edge that answered the
	// mailbox kept its view, so the new edge has it even before its own
	// first read).
	j.mock.Next(mockmodel.ToolCall{Name: "mempalace_mempalace_status", Args: map[string]any{}})
	if out, errOut, err := j.h.Run(j.t, 120*time.Second, j.oc, "run", "what do I owe?"); err != nil {
		t.Fatalf("opencode run: %v\n%s\n%s", err, out, errOut)
	}
	sys := j.mock.LastSystem()
	j.check("edge", "a new session's model has the owed ask in its system prompt, without a tool call", strings.Contains(sys, "please review the journey patch") && strings.Contains(sys, "owes 1 ask") && !strings.Contains(sys, "a broadcast owes nobody"), sys)

	// 4. Offline: the primary stops.
	j.srv.Stop()
	j.checkConnected("offline", "opencode mcp list: mempalace still connected")
	res = j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "journey note written offline"})
	j.check("offline", "a write succeeds locally and is queued", strings.Contains(res, `"replication": "queued"`) && j.local().CountContent("journey note written offline") == 1, res)
	res = j.run("search", map[string]any{"query": "journey note", "limit": 10})
	j.check("offline", "a search answers from the local palace, marked degraded", strings.Contains(res, `"degraded": true`) && strings.Contains(res, "written offline"), res)
	toolsOffline := mempalaceTools(j.mock.Offered())
	j.check("offline", fmt.Sprintf("opencode still offers every mempalace tool (%d)", len(toolsOnline)), len(toolsOnline) > 20 && strings.Join(toolsOnline, ",") == strings.Join(toolsOffline, ","), toolsOnline, toolsOffline)
	if err := j.srv.Start(""); err != nil {
		t.Fatal(err)
	}
	j.check("offline", "primary back: the queued write arrives, exactly once, by itself", eventually(func() bool { return j.primary.Dump().CountContent("journey note written offline") == 1 }) && stays(func() bool { return j.primary.Dump().CountContent("journey note written offline") == 1 }))
	serve.Stop()

	// 5. The user edits the managed entry, then changes .env.
	edited := strings.Replace(read(j.cfg), `"enabled": true`, `"enabled": true,
      "timeout": 20000`, 1)
	os.WriteFile(j.cfg, []byte(edited), 0o644)
	j.setEnv(map[string]string{"MEMPALACE_REMOTE_URL": j.srv.URL(), "MEMPALACE_REMOTE_TOKEN": token})
	log := j.render()
	j.check("edit", "the user's edit is kept", read(j.cfg) == edited)
	j.check("edit", "opencode.jsonc.proposed holds the new value", strings.Contains(read(j.cfg+".proposed"), `"type": "remote"`))
	j.check("edit", "a log line names the .proposed file", strings.Contains(log, "kept your edit") && strings.Contains(log, j.cfg+".proposed"), log)

	// 6. Reversal (R6): the variables are cleared; the user lets render
	// take the entry back.
	j.setEnv(nil)
	j.render("--reclaim")
	j.check("reversal", "back to the solitary entry", strings.Contains(read(j.cfg), `"command": ["mempalace-mcp"]`) && !strings.Contains(read(j.cfg), "timeout"), read(j.cfg))
	j.checkConnected("reversal", "opencode mcp list: mempalace connected (local)")
	res = j.run("search", map[string]any{"query": "journey note", "limit": 10})
	j.check("reversal", "the local palace is intact, with the writes made in edge mode", strings.Contains(res, "written in edge mode") && strings.Contains(res, "written offline"), res)
	j.check("reversal", "no devbox-config process is left running", !anyProcess(j.bin, filepath.Join(h.Bin, "devbox-config")))
}

func (j *journey) primaryCall(tool string, args map[string]any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args}})
	req, _ := http.NewRequest("POST", j.srv.URL(), strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		j.t.Fatal(err)
	}
	resp.Body.Close()
}

// serve starts `opencode serve` (as a running TUI would keep its MCP
// servers up) and waits until mempalace is connected.
func (j *journey) serve() *testbed.Proc {
	port := testbed.FreePort(j.t)
	p := testbed.Start(j.t, j.h.Environ(), "", j.oc, "serve", "--port", strconv.Itoa(port), "--hostname", "127.0.0.1")
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	client := &http.Client{Timeout: 5 * time.Second} // a starting serve may hold a request
	ok := eventually(func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"mempalace":{"status":"connected"}`)
	})
	if !ok {
		j.t.Fatalf("opencode serve never connected mempalace:\n%s", p.Log())
	}
	return p
}

func read(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func eventually(cond func() bool) bool {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// stays checks a condition keeps holding for a moment (no late duplicate).
func stays(cond func() bool) bool {
	for i := 0; i < 10; i++ {
		if !cond() {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// proc is one process of a tree.
type proc struct {
	pid     int
	cmdline string
}

func (p proc) String() string { return fmt.Sprintf("%d %s", p.pid, p.cmdline) }

func processTree(root int) []proc {
	var out []proc
	var walk func(int)
	walk = func(pid int) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, proc{pid, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")})
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
			for _, k := range strings.Fields(string(kids)) {
				if c, err := strconv.Atoi(k); err == nil {
					walk(c)
				}
			}
		}
	}
	walk(root)
	return out
}

// hasCmd reports a process in the tree whose executable is name.
func hasCmd(tree []proc, name string) bool {
	for _, p := range tree {
		if p.is(name) {
			return true
		}
	}
	return false
}

func (p proc) is(name string) bool {
	argv0, _, _ := strings.Cut(p.cmdline, " ")
	return filepath.Base(argv0) == name
}

// anyProcess reports a running process started from one of paths (this
// journey's binaries: other tests running in parallel have their own).
func anyProcess(paths ...string) bool {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
		if r, err := filepath.EvalSymlinks(p); err == nil {
			want[r] = true
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			argv0, _, _ := strings.Cut(string(b), "\x00")
			if want[exe] || want[argv0] {
				return true
			}
		}
	}
	return false
}

// noSockets reports that the processes of the tree named name hold no
// network socket: none of their socket inodes is in the kernel's TCP or
// UDP tables (opencode gives stdio servers Unix socketpairs for stdin and
// stdout, which are not network).
func noSockets(tree []proc, name string) bool {
	seen := false
	for _, p := range tree {
		if !p.is(name) {
			continue
		}
		seen = true
		inet := map[string]bool{}
		for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", p.pid, table))
			for _, line := range strings.Split(string(b), "\n")[1:] {
				if f := strings.Fields(line); len(f) > 9 {
					inet[f[9]] = true
				}
			}
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
		for _, fd := range fds {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.pid, fd.Name()))
			if ino, ok := strings.CutPrefix(l, "socket:["); ok && inet[strings.TrimSuffix(ino, "]")] {
				return false
			}
		}
	}
	return seen
}
