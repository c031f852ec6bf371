package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// piJourney is the opencode journey's pi half: pi (pinned
// @mariozechner/pi-coding-agent) with pi-mcp-adapter loading the
// ~/.pi/agent/mcp.json that render wrote, a mock model making it call a
// mempalace tool through the adapter's one "mcp" tool, rung by rung.
type piJourney struct {
	journey
	pi, adapter string
}

const piToken = "tok-SECRET-pi-journey"

// piClient finds pi and the adapter in $DEVBOX_REALCLIENTS. The pinned pair
// does not load as installed: the adapter imports pi's packages under
// their new scope (@earendil-works/*), which pi 0.73.1 does not provide,
// and the renamed pi needs Node >= 22.1 (this machine class has Node 20).
// scripts/install-realclients links the new names to the old packages (the
// adapter uses only helpers 0.73.1 has).
func piClient(t *testing.T) (pi, adapter string) {
	t.Helper()
	dir := testbed.Dir(t)
	pi = filepath.Join(dir, "node_modules", ".bin", "pi")
	adapter = filepath.Join(dir, "node_modules", "pi-mcp-adapter", "index.ts")
	shim := filepath.Join(dir, "node_modules", "@earendil-works", "pi-coding-agent", "package.json")
	for _, p := range []string{pi, adapter, shim} {
		if _, err := os.Stat(p); err != nil {
			msg := fmt.Sprintf("%s missing: pi 0.73.1 and pi-mcp-adapter 2.36.0 with the @earendil-works shim are installed by scripts/install-realclients", p)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return pi, adapter
}

// rpc starts pi in RPC mode and returns a function sending one prompt and
// waiting for a line matching want (the adapter answers slash commands
// with UI notifications).
func (j *piJourney) rpc(ctx context.Context) (send func(msg string, want *regexp.Regexp) string, stop func()) {
	j.t.Helper()
	cmd := exec.CommandContext(ctx, j.pi, "--mode", "rpc", "--no-session", "-e", j.adapter)
	cmd.Dir, cmd.Env = j.h.Proj, append(j.h.Environ(), "PI_OFFLINE=1")
	cmd.WaitDelay = 5 * time.Second
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		j.t.Fatal(err)
	}
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	wait := func(want *regexp.Regexp) string {
		var seen []string
		timeout := time.After(60 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return "pi exited; it printed:\n" + strings.Join(seen, "\n")
				}
				seen = append(seen, l)
				if want.MatchString(l) {
					return l
				}
			case <-timeout:
				return "timed out; pi printed:\n" + strings.Join(seen, "\n")
			}
		}
	}
	// The adapter announces its servers once pi is up; commands sent
	// before that fail inside the adapter.
	wait(regexp.MustCompile(`"statusKey":"mcp".*server`))
	send = func(msg string, want *regexp.Regexp) string {
		b, _ := json.Marshal(map[string]string{"type": "prompt", "message": msg})
		fmt.Fprintln(stdin, string(b))
		return wait(want)
	}
	return send, func() { stdin.Close(); cmd.Wait() }
}

var piConnectedRE = regexp.MustCompile(`✓ mempalace: connected[^(]*\((\d+) tools\)`)

// checkConnected asks the adapter to connect and reports its status line.
func (j *piJourney) checkConnected(step, what string) {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	send, stop := j.rpc(ctx)
	defer stop()
	rec := send("/mcp reconnect mempalace", regexp.MustCompile(`Reconnected to mempalace|Failed|failed|error`))
	status := send("/mcp status", regexp.MustCompile(`MCP Server Status`))
	m := piConnectedRE.FindStringSubmatch(status)
	j.check(step, what, m != nil && m[1] != "0", "reconnect: ", rec, "\nstatus: ", status)
}

// run makes pi call one mempalace tool through the adapter's "mcp" tool
// and returns the tool's result as pi passed it back to the model.
func (j *piJourney) run(tool string, args map[string]any) string {
	j.t.Helper()
	j.mock.Next(ToolCall{Name: "mcp", Args: map[string]any{"tool": "mempalace_" + tool, "args": args}})
	out, errOut, err := j.h.Run(j.t, 120*time.Second, j.pi, "-p", "--no-session", "-e", j.adapter, "--provider", "mock", "--model", "mock-1", "please use memory")
	if err != nil || !strings.Contains(out, "MOCK DONE") {
		j.t.Fatalf("pi -p (%s): %v\nstdout:\n%s\nstderr:\n%s", tool, err, out, errOut)
	}
	return j.mock.LastResult()
}

// TestPiJourney: solitary, remote, edge and offline with pi and
// pi-mcp-adapter, the transcript printed as it goes.
func TestPiJourney(t *testing.T) {
	pi, adapter := piClient(t)
	h := testbed.NewHome(t)
	j := &piJourney{journey: journey{t: t, h: h}, pi: pi, adapter: adapter}
	j.bin = testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	h.Link(t, j.bin, "devbox-config")
	h.Link(t, testbed.Build(t, "./cmd/fakepalace", "mempalace-mcp"), "mempalace-mcp")
	j.palace = filepath.Join(h.Dir, ".mempalace", "palace")
	h.Setenv("MEMPALACE_PALACE_PATH", j.palace)
	var err error
	if j.mock, err = StartMockLLM(); err != nil {
		t.Fatal(err)
	}
	defer j.mock.Close()
	agent := filepath.Join(h.Dir, ".pi", "agent")
	os.MkdirAll(agent, 0o755)
	// The user's pi: the mock model as its provider, and the adapter's file
	// with a server of their own.
	os.WriteFile(filepath.Join(agent, "models.json"), []byte(`{"providers": {"mock": {"baseUrl": "`+j.mock.URL+`", "api": "openai-completions", "apiKey": "x", "models": [{"id": "mock-1"}]}}}`), 0o644)
	mcpFile := filepath.Join(agent, "mcp.json")
	os.WriteFile(mcpFile, []byte("{\n  \"mcpServers\": {}\n}\n"), 0o644)
	j.cfg = mcpFile

	// 1. Solitary (no MEMPALACE_*).
	j.render()
	j.check("solitary", "render writes the local stdio entry to ~/.pi/agent/mcp.json", strings.Contains(read(mcpFile), `"command": "mempalace-mcp"`), read(mcpFile))
	before := read(mcpFile)
	j.checkConnected("solitary", "pi /mcp status: mempalace connected")
	res := j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "solitary drawer from pi"})
	j.check("solitary", "the model's add_drawer lands in the local palace", j.local().CountContent("solitary drawer from pi") == 1, res)
	j.check("solitary", "pi and the adapter leave mcp.json as it was", read(mcpFile) == before, read(mcpFile))

	// 2. Remote.
	j.primary, _ = fakepalace.New(fakepalace.Options{Dir: t.TempDir()})
	j.srv = j.primary.NewHTTP(fakepalace.HTTPOptions{Token: piToken})
	if err := j.srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer j.srv.Stop()
	j.setEnv(map[string]string{"MEMPALACE_REMOTE_URL": j.srv.URL(), "MEMPALACE_REMOTE_TOKEN": piToken})
	j.render()
	j.check("remote", "render switches the entry to the primary (bearerTokenEnv)", strings.Contains(read(mcpFile), `"bearerTokenEnv": "MEMPALACE_REMOTE_TOKEN"`), read(mcpFile))
	j.checkConnected("remote", "pi /mcp status: mempalace connected (to the primary)")
	res = j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "remote drawer from pi"})
	j.check("remote", "a write goes straight to the primary", j.primary.Dump().CountContent("remote drawer from pi") == 1, res)
	found, nread := testbed.FilesContaining(h.Dir, piToken)
	j.check("remote", "the token is in no file on disk", len(found) == 0 && nread > 0, found)

	// 3. Edge.
	j.setEnv(map[string]string{"MEMPALACE_REMOTE_URL": j.srv.URL(), "MEMPALACE_REMOTE_TOKEN": piToken, "MEMPALACE_EDGE": "1"})
	j.render()
	j.check("edge", "pi's server command is the edge", strings.Contains(read(mcpFile), `"command": "devbox-config"`), read(mcpFile))
	j.checkConnected("edge", "pi /mcp status: mempalace connected (through the edge)")
	res = j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "edge drawer from pi"})
	j.check("edge", "the write lands locally", j.local().CountContent("edge drawer from pi") == 1, res)
	j.check("edge", "and on the primary", eventually(func() bool { return j.primary.Dump().CountContent("edge drawer from pi") == 1 }))

	// 4. Offline.
	j.srv.Stop()
	j.checkConnected("offline", "pi /mcp status: mempalace still connected")
	res = j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "offline drawer from pi"})
	j.check("offline", "a write succeeds locally and is queued", strings.Contains(res, "queued") && j.local().CountContent("offline drawer from pi") == 1, res)
	if err := j.srv.Start(""); err != nil {
		t.Fatal(err)
	}
	// The next pi session starts an edge, whose flusher sends the queue
	// while pi runs (as a pi left open in a terminal would).
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	send, stop := j.rpc(ctx)
	rec := send("/mcp reconnect mempalace", regexp.MustCompile(`Reconnected to mempalace|Failed|failed|error`))
	j.check("back", "primary back: the queued write arrives once, by itself, while pi runs",
		eventually(func() bool { return j.primary.Dump().CountContent("offline drawer from pi") == 1 }) && stays(func() bool { return j.primary.Dump().CountContent("offline drawer from pi") == 1 }), rec)
	stop()
	found, nread = testbed.FilesContaining(h.Dir, piToken)
	j.check("back", "the token is in no file on disk", len(found) == 0 && nread > 0, found)
}
