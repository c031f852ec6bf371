package e2e

import (
	"bufio"
	"bytes"
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
	"github.com/joakimp/devbox-config/render"
	"github.com/joakimp/devbox-config/testbed"
	"github.com/joakimp/devbox-config/testbed/mockmodel"
)

// piJourney is the opencode journey's pi half: pi (pinned
// @mariozechner/pi-coding-agent) with pi-mcp-adapter loading the
// ~/.pi/agent/mcp.json that render wrote, a mock model making it call a
// mempalace tool through the adapter's one "mcp" tool, rung by rung.
type piJourney struct {
	journey
	pi, adapter string
	// wrote holds the bytes of the pi files render manages (piFiles) as
	// the last render left them; pi must leave them so (checkPiLeft).
	wrote map[string][]byte
}

// piUserServer is the user's own server in ~/.pi/agent/mcp.json, exactly
// as they wrote it (indentation, one-line array, key order): render must
// keep these bytes as they are. pi-mcp-adapter's servers are lazy (README
// "Lifecycle Modes": connected on the first call of one of their tools,
// not at startup) and /mcp status lists a server it has not started, so
// after the user's first session (step 0, which starts every server once)
// pi shows it without running it. The command is harmless and leaves a
// mark when something starts it (userFirstSession, checkPiLeft).
const piUserServer = `"my-notes": {
      "command": "sh",
      "args": ["-c", "touch \"$HOME/my-notes.started\""],
      "lifecycle": "lazy"
    }`

// piUserMCP is the user's ~/.pi/agent/mcp.json before devbox-config.
const piUserMCP = "{\n  \"mcpServers\": {\n    " + piUserServer + "\n  }\n}\n"

// piUserFailedRE is the line after the user's first session started it.
var piUserFailedRE = regexp.MustCompile(`✗ my-notes: failed \d+s ago — Connection closed`)

// piUserStatusRE is /mcp status's line for the user's server: configured,
// never started, so not connected and no tools known.
var piUserStatusRE = regexp.MustCompile(`○ my-notes: not listening \(disconnected\) \(0 tools\)`)

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
			testbed.Missing(t, fmt.Sprintf("%s missing: pi 0.73.1 and pi-mcp-adapter 2.36.0 with the @earendil-works shim are installed by scripts/install-realclients", p))
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
	j.check(step, "pi /mcp status still lists the user's my-notes (lazy, not started)", piUserStatusRE.MatchString(status), "status: ", status)
}

// userFirstSession runs the user's pi once before any render (see the
// journey's step 0) and removes the mark my-notes left.
func (j *piJourney) userFirstSession() {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	send, stop := j.rpc(ctx)
	// pi may take the command while the adapter is still connecting
	// my-notes, which /mcp status shows as not listening: ask again until
	// the failure is in.
	var status string
	for i := 0; i < 20; i++ {
		if status = send("/mcp status", regexp.MustCompile(`MCP Server Status`)); piUserFailedRE.MatchString(status) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	stop()
	mark := filepath.Join(j.h.Dir, "my-notes.started")
	_, err := os.Stat(mark)
	j.check("before", "the user's first pi session starts my-notes once to fill mcp-cache.json", err == nil, err, "\nstatus: ", status)
	j.check("before", "pi /mcp status lists the user's my-notes (failed: not an MCP server)", piUserFailedRE.MatchString(status), "status: ", status)
	j.check("before", "the user's pi leaves their mcp.json as they wrote it", read(j.cfg) == piUserMCP, read(j.cfg))
	if err := os.Remove(mark); err != nil {
		j.t.Fatal(err)
	}
}

// piFiles are the files under ~/.pi/agent that render manages: the
// adapter's mcp.json and pi's settings.json (render merges its template
// into it, planPiSettings).
func (j *piJourney) piFiles() []string {
	agent := filepath.Join(j.h.Dir, ".pi", "agent")
	return []string{filepath.Join(agent, "mcp.json"), filepath.Join(agent, "settings.json")}
}

// renderPi runs render, checks that the user's own server came through
// byte for byte, and keeps the bytes render left in piFiles for
// checkPiLeft.
func (j *piJourney) renderPi(step string) {
	j.t.Helper()
	j.render()
	mcp := read(j.cfg)
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	err := json.Unmarshal([]byte(mcp), &doc)
	j.check(step, "render keeps the user's my-notes entry in mcp.json byte for byte",
		err == nil && doc.MCPServers["my-notes"] != nil && strings.Count(mcp, piUserServer) == 1,
		"parse error: ", err, "\nwant this once, verbatim:\n", piUserServer, "\nrender wrote:\n", mcp)
	j.wrote = map[string][]byte{}
	for _, f := range j.piFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			j.t.Fatalf("%s: after render: %v", step, err)
		}
		j.wrote[f] = b
	}
}

// checkPiLeft checks, after pi ran, that every file in piFiles holds the
// bytes render wrote (a diff says what changed if not), and that nothing
// started the user's lazy server.
func (j *piJourney) checkPiLeft(step string) {
	j.t.Helper()
	for _, f := range j.piFiles() {
		now, err := os.ReadFile(f)
		if err != nil {
			j.t.Fatalf("%s: after pi: %v", step, err)
		}
		d := render.Change{Path: f, Old: j.wrote[f], New: now}.Diff("")
		j.check(step, "pi leaves ~/.pi/agent/"+filepath.Base(f)+" byte for byte as render wrote it", bytes.Equal(now, j.wrote[f]), "pi changed it:\n", d)
	}
	_, err := os.Stat(filepath.Join(j.h.Dir, "my-notes.started"))
	j.check(step, "nothing started the user's lazy my-notes server", os.IsNotExist(err), err)
}

// run makes pi call one mempalace tool through the adapter's "mcp" tool
// and returns the tool's result as pi passed it back to the model.
func (j *piJourney) run(tool string, args map[string]any) string {
	j.t.Helper()
	j.mock.Next(mockmodel.ToolCall{Name: "mcp", Args: map[string]any{"tool": "mempalace_" + tool, "args": args}})
	out, errOut, err := j.h.Run(j.t, 120*time.Second, j.pi, "-p", "--no-session", "-e", j.adapter, "--provider", "mock", "--model", "mock-1", "please use memory")
	if err != nil || !strings.Contains(out, "MOCK DONE") {
		j.t.Fatalf("pi -p (%s): %v\nstdout:\n%s\nstderr:\n%s", tool, err, out, errOut)
	}
	return j.mock.LastToolResult()
}

// TestPiJourney: solitary, remote, edge and offline with pi and
// pi-mcp-adapter, the transcript printed as it goes.
func TestPiJourney(t *testing.T) {
	testbed.Integration(t, "the pi journey: the real client from npm, the binaries built")
	pi, adapter := piClient(t)
	h := testbed.NewHome(t)
	j := &piJourney{journey: journey{t: t, h: h}, pi: pi, adapter: adapter}
	j.bin = testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	h.Link(t, j.bin, "devbox-config")
	h.Link(t, testbed.Build(t, "./cmd/fakepalace", "mempalace-mcp"), "mempalace-mcp")
	j.palace = filepath.Join(h.Dir, ".mempalace", "palace")
	h.Setenv("MEMPALACE_PALACE_PATH", j.palace)
	j.mock = mockmodel.Start(t)
	agent := filepath.Join(h.Dir, ".pi", "agent")
	os.MkdirAll(agent, 0o755)
	// The user's pi: the mock model as its provider, and the adapter's file
	// with a server of their own (piUserServer), and an empty settings.json
	// (render merges its template into it; it creates none, R1).
	os.WriteFile(filepath.Join(agent, "models.json"), []byte(`{"providers": {"mock": {"baseUrl": "`+j.mock.URL+`/v1", "api": "openai-completions", "apiKey": "x", "models": [{"id": "mock-1"}]}}}`), 0o644)
	os.WriteFile(filepath.Join(agent, "settings.json"), []byte("{}\n"), 0o644)
	mcpFile := filepath.Join(agent, "mcp.json")
	os.WriteFile(mcpFile, []byte(piUserMCP), 0o644)
	j.cfg = mcpFile

	// 0. Before devbox-config: the user's pi on their own mcp.json. A
	// first session (no ~/.pi/agent/mcp-cache.json yet) connects every
	// server once, lazy or not, to fill the adapter's metadata cache
	// (init.ts, bootstrapAll): my-notes runs here, once, and fails, not
	// being an MCP server. Its mark is the positive control for
	// checkPiLeft's "nothing started the user's lazy my-notes server".
	j.userFirstSession()

	// 1. Solitary (no MEMPALACE_*).
	j.renderPi("solitary")
	j.check("solitary", "render writes the local stdio entry to ~/.pi/agent/mcp.json", strings.Contains(read(mcpFile), `"command": "mempalace-mcp"`), read(mcpFile))
	j.checkConnected("solitary", "pi /mcp status: mempalace connected")
	res := j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "solitary drawer from pi"})
	j.check("solitary", "the model's add_drawer lands in the local palace", j.local().CountContent("solitary drawer from pi") == 1, res)
	j.checkPiLeft("solitary")

	// 2. Remote.
	j.primary, j.srv = testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: piToken})
	j.setEnv(map[string]string{"MEMPALACE_REMOTE_URL": j.srv.URL(), "MEMPALACE_REMOTE_TOKEN": piToken})
	j.renderPi("remote")
	j.check("remote", "render switches the entry to the primary (bearerTokenEnv)", strings.Contains(read(mcpFile), `"bearerTokenEnv": "MEMPALACE_REMOTE_TOKEN"`), read(mcpFile))
	j.checkConnected("remote", "pi /mcp status: mempalace connected (to the primary)")
	res = j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "remote drawer from pi"})
	j.check("remote", "a write goes straight to the primary", j.primary.Dump().CountContent("remote drawer from pi") == 1, res)
	j.checkPiLeft("remote")
	found, nread := testbed.FilesContaining(h.Dir, piToken)
	j.check("remote", "the token is in no file on disk", len(found) == 0 && nread > 0, found)

	// 3. Edge.
	j.setEnv(map[string]string{"MEMPALACE_REMOTE_URL": j.srv.URL(), "MEMPALACE_REMOTE_TOKEN": piToken, "MEMPALACE_EDGE": "1"})
	j.renderPi("edge")
	j.check("edge", "pi's server command is the edge", strings.Contains(read(mcpFile), `"command": "devbox-config"`), read(mcpFile))
	j.checkConnected("edge", "pi /mcp status: mempalace connected (through the edge)")
	res = j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "edge drawer from pi"})
	j.check("edge", "the write lands locally", j.local().CountContent("edge drawer from pi") == 1, res)
	j.check("edge", "and on the primary", eventually(func() bool { return j.primary.Dump().CountContent("edge drawer from pi") == 1 }))
	j.checkPiLeft("edge")

	// 4. Offline: no render, so pi's files must still be the edge
	// rung's render's bytes.
	j.srv.Stop()
	j.checkConnected("offline", "pi /mcp status: mempalace still connected")
	res = j.run("add_drawer", map[string]any{"wing": "journey", "room": "notes", "content": "offline drawer from pi"})
	j.check("offline", "a write succeeds locally and is queued", strings.Contains(res, "queued") && j.local().CountContent("offline drawer from pi") == 1, res)
	j.checkPiLeft("offline")
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
	j.checkPiLeft("back")
	found, nread = testbed.FilesContaining(h.Dir, piToken)
	j.check("back", "the token is in no file on disk", len(found) == 0 && nread > 0, found)
}
