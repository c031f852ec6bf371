package render

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/testbed"
)

// The pinned real clients (realclients/package.json) load what render
// wrote for them, rung by rung, offline, in an isolated HOME: Claude Code
// and Gemini CLI connect in `mcp list`; Codex's `mcp list` only reads the
// config, so its app-server is asked for the server's tools as well. In edge
// mode the primary must see authorized requests from the edge and no 401:
// that is what proves the entry got the token past Codex's and Gemini's
// filters of a stdio server's environment.

const clientToken = "tok-SECRET-harness-clients"

// realClient returns node_modules/.bin/<bin> from $DEVBOX_REALCLIENTS.
func realClient(t *testing.T, bin string) string {
	t.Helper()
	testbed.Integration(t, "drives the real harness CLIs from npm")
	return testbed.Bin(t, bin)
}

type clientRig struct {
	h       *testbed.Home
	primary *fakepalace.HTTPServer
}

func newClientRig(t *testing.T) *clientRig {
	t.Helper()
	h := testbed.NewHome(t)
	bin := testbed.Build
	if testing.Short() { // the unit tier only checks the entries: commands on PATH, never run
		bin = func(t testing.TB, _, name string) string { return testbed.Self(t, name) }
	}
	h.Link(t, bin(t, "./cmd/fakepalace", "mempalace-mcp"), "mempalace-mcp")
	h.Link(t, bin(t, "./cmd/devbox-config", "devbox-config"), "devbox-config")
	h.Setenv("MEMPALACE_PALACE_PATH", filepath.Join(h.Dir, ".mempalace", "palace"))
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: clientToken})
	return &clientRig{h: h, primary: srv}
}

type clientRung struct {
	name string
	env  map[string]string
}

func (r *clientRig) rungs() []clientRung {
	u := r.primary.URL()
	return []clientRung{
		{"solitary", nil},
		{"remote", map[string]string{"MEMPALACE_REMOTE_URL": u, "MEMPALACE_REMOTE_TOKEN": clientToken}},
		{"edge", map[string]string{"MEMPALACE_REMOTE_URL": u, "MEMPALACE_REMOTE_TOKEN": clientToken, "MEMPALACE_EDGE": "1"}},
	}
}

// render sets the rung's variables and renders one target.
func (r *clientRig) render(t *testing.T, target string, rung clientRung) Result {
	t.Helper()
	for _, k := range []string{"MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE"} {
		r.h.Setenv(k, rung.env[k])
	}
	res, _, err := Run(Options{Home: r.h.Dir, Env: r.h.Lookup, Targets: []string{target},
		LookPath: func(string) (string, error) { return filepath.Join(r.h.Bin, "mempalace-mcp"), nil }}, false)
	if err != nil || len(res) != 1 || res[0].Kept() {
		t.Fatalf("render %s: %v %+v", target, err, res)
	}
	return res[0]
}

// primaryCounts is the primary's request count by HTTP status.
func (r *clientRig) primaryCounts(t *testing.T) map[string]float64 {
	t.Helper()
	_, body := testbed.Request(t, "GET", strings.TrimSuffix(r.primary.URL(), "/mcp")+"/statusz", "", map[string]string{"Authorization": "Bearer " + clientToken})
	var st struct {
		Requests struct {
			ByStatus map[string]float64 `json:"by_status"`
		} `json:"requests"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("statusz: %v\n%s", err, body)
	}
	return st.Requests.ByStatus
}

// checkPrimary: in remote and edge mode the primary got authorized
// requests while the client ran, and no 401 (a token lost on the way).
func (r *clientRig) checkPrimary(t *testing.T, rung clientRung, before map[string]float64) {
	t.Helper()
	if rung.name == "solitary" {
		return
	}
	after := r.primaryCounts(t)
	if after["401"] > before["401"] {
		t.Errorf("%s: the primary refused %v request(s) with 401: the token did not reach it", rung.name, after["401"]-before["401"])
	}
	// one 200 is our own statusz request
	if after["200"]-before["200"] < 2 {
		t.Errorf("%s: the primary got no authorized request while the client ran (by status before %v, after %v)", rung.name, before, after)
	}
}

var claudeListRE = regexp.MustCompile(`(?m)^mempalace: .* - (✔ Connected|✘ .*)$`)

func TestClaudeCodeListsEveryRung(t *testing.T) {
	testbed.Integration(t, "drives the real harness CLIs from npm and builds the binaries")
	claude := realClient(t, "claude")
	r := newClientRig(t)
	r.h.Setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
	file := filepath.Join(r.h.Dir, ".claude.json")
	for _, rung := range r.rungs() {
		t.Run(rung.name, func(t *testing.T) {
			res := r.render(t, TargetClaudeCode, rung)
			before, _ := os.ReadFile(file)
			entry := jsonAt(t, before, "mcpServers", "mempalace")
			counts := r.primaryCounts(t)
			out, errOut, err := r.h.Run(t, 90*time.Second, claude, "mcp", "list")
			if err != nil {
				t.Fatalf("claude mcp list: %v\n%s%s", err, out, errOut)
			}
			m := claudeListRE.FindStringSubmatch(out)
			if m == nil || m[1] != "✔ Connected" {
				t.Fatalf("claude mcp list does not show mempalace connected (%s):\n%s%s", res.Action, out, errOut)
			}
			r.checkPrimary(t, rung, counts)
			// Claude Code rewrites ~/.claude.json itself (first start: its
			// own top-level keys). The entry must survive as written, and the
			// next render must see nothing to do.
			after, _ := os.ReadFile(file)
			if same, _ := fingerprint.Equal(entry, jsonAt(t, after, "mcpServers", "mempalace")); !same {
				t.Fatalf("Claude Code changed mcpServers.mempalace:\n%s", after)
			}
			if !bytes.Equal(before, after) {
				// Say precisely what it changed: top-level keys it added, and
				// none it removed or changed (mcpServers included).
				added, removed, changed := topLevelDiff(t, before, after)
				if len(removed) > 0 || len(changed) > 0 {
					t.Fatalf("Claude Code removed %v and changed %v in %s:\n%s", removed, changed, file, after)
				}
				t.Logf("Claude Code rewrote %s: it added the top-level keys %v and changed nothing else", file, added)
			}
			if again := r.render(t, TargetClaudeCode, rung); again.Action != "unchanged" || len(again.Changes) != 0 {
				t.Fatalf("render after Claude Code ran: %s, %d changes", again.Action, len(again.Changes))
			}
			testbed.NoFileContains(t, r.h.Dir, clientToken)
		})
	}
}

var geminiListRE = regexp.MustCompile(`(?m)^[✓✗] mempalace: .* - (Connected|Disconnected|Disabled)`)

func TestGeminiListsEveryRung(t *testing.T) {
	testbed.Integration(t, "drives the real harness CLIs from npm and builds the binaries")
	gemini := realClient(t, "gemini")
	r := newClientRig(t)
	// Else user-level servers show "Disabled" in an untrusted folder.
	r.h.Setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
	file := filepath.Join(r.h.Dir, ".gemini", "settings.json")
	for _, rung := range r.rungs() {
		t.Run(rung.name, func(t *testing.T) {
			r.render(t, TargetGemini, rung)
			before, _ := os.ReadFile(file)
			counts := r.primaryCounts(t)
			out, errOut, err := r.h.Run(t, 120*time.Second, gemini, "mcp", "list")
			if err != nil {
				t.Fatalf("gemini mcp list: %v\n%s%s", err, out, errOut)
			}
			m := geminiListRE.FindStringSubmatch(testbedPlain(out + errOut))
			if m == nil || m[1] != "Connected" {
				t.Fatalf("gemini mcp list does not show mempalace connected:\n%s%s", out, errOut)
			}
			r.checkPrimary(t, rung, counts)
			if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
				t.Fatalf("Gemini CLI rewrote settings.json:\n%s", after)
			}
			testbed.NoFileContains(t, r.h.Dir, clientToken)
		})
	}
}

func TestCodexListsEveryRung(t *testing.T) {
	testbed.Integration(t, "drives the real harness CLIs from npm and builds the binaries")
	codex := realClient(t, "codex")
	r := newClientRig(t)
	file := filepath.Join(r.h.Dir, ".codex", "config.toml")
	for _, rung := range r.rungs() {
		t.Run(rung.name, func(t *testing.T) {
			r.render(t, TargetCodex, rung)
			before, _ := os.ReadFile(file)
			// --disable plugins: else Codex clones its plugin repository.
			out, errOut, err := r.h.Run(t, 60*time.Second, codex, "--disable", "plugins", "mcp", "list", "--json")
			if err != nil {
				t.Fatalf("codex mcp list: %v\n%s%s", err, out, errOut)
			}
			var listed []struct {
				Name      string `json:"name"`
				Enabled   bool   `json:"enabled"`
				Transport struct {
					Type              string `json:"type"`
					URL               string `json:"url"`
					BearerTokenEnvVar string `json:"bearer_token_env_var"`
				} `json:"transport"`
			}
			if err := json.Unmarshal([]byte(out), &listed); err != nil {
				t.Fatalf("codex mcp list --json: %v\n%s%s", err, out, errOut)
			}
			if len(listed) != 1 || listed[0].Name != "mempalace" || !listed[0].Enabled {
				t.Fatalf("codex mcp list: %s", out)
			}
			if rung.name == "remote" && (listed[0].Transport.URL != r.primary.URL() || listed[0].Transport.BearerTokenEnvVar != "MEMPALACE_REMOTE_TOKEN") {
				t.Fatalf("codex reads the remote entry as %+v", listed[0].Transport)
			}
			counts := r.primaryCounts(t)
			tools, toolsErr := codexServerTools(t, r.h, codex)
			if toolsErr != "" || tools < 10 {
				t.Fatalf("codex app-server: mempalace has %d tools, error %q", tools, toolsErr)
			}
			r.checkPrimary(t, rung, counts)
			if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
				t.Fatalf("Codex rewrote config.toml:\n%s", after)
			}
			testbed.NoFileContains(t, r.h.Dir, clientToken)
		})
	}
}

// codexServerTools asks `codex app-server` (line JSON-RPC, no login, no
// model) for the mempalace server's status: Codex really starts or dials it.
func codexServerTools(t *testing.T, h *testbed.Home, codex string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "--disable", "plugins", "app-server")
	cmd.Dir, cmd.Env = h.Proj, h.Environ()
	cmd.WaitDelay = 5 * time.Second
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cancel(); cmd.Wait() }()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"devbox-config-test","version":"1"}}}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"initialized"}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"mcpServerStatus/list","params":{}}`)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Data []struct {
					Name       string         `json:"name"`
					Tools      map[string]any `json:"tools"`
					ToolsError any            `json:"toolsError"`
				} `json:"data"`
			} `json:"result"`
			Error any `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID != 2 {
			continue
		}
		if msg.Error != nil {
			t.Fatalf("mcpServerStatus/list: %v", msg.Error)
		}
		for _, s := range msg.Result.Data {
			if s.Name == "mempalace" {
				e := ""
				if s.ToolsError != nil {
					e = fmt.Sprint(s.ToolsError)
				}
				return len(s.Tools), e
			}
		}
		t.Fatalf("mcpServerStatus/list has no mempalace: %s", sc.Bytes())
	}
	t.Fatalf("codex app-server gave no answer: %v\n%s", sc.Err(), stderr.String())
	return 0, ""
}

// Cursor and VS Code are desktop applications: neither has an npm package
// or a CLI that lists MCP servers without a display, so no real client
// checks their files here. The entries are checked against the shapes the
// two document (cursor.com/docs/mcp; code.visualstudio.com/docs/copilot/
// reference/mcp-configuration) for every rung, and must hold no token.
func TestCursorAndVSCodeEntryShape(t *testing.T) {
	t.Run("real-client", func(t *testing.T) {
		t.Skip("Cursor and VS Code cannot run here: desktop apps, no npm package, no headless `mcp list`; the file shape is checked instead")
	})
	r := newClientRig(t)
	for _, rung := range r.rungs() {
		for _, c := range []struct {
			target, file, key, ref string
			typed                  bool
		}{
			{TargetCursor, filepath.Join(r.h.Dir, ".cursor", "mcp.json"), "mcpServers", "${env:MEMPALACE_REMOTE_TOKEN}", false},
			{TargetVSCode, filepath.Join(r.h.Dir, ".config", "Code", "User", "mcp.json"), "servers", "${env:MEMPALACE_REMOTE_TOKEN}", true},
		} {
			t.Run(c.target+"/"+rung.name, func(t *testing.T) {
				r.render(t, c.target, rung)
				b, _ := os.ReadFile(c.file)
				var doc map[string]map[string]map[string]any
				if err := json.Unmarshal(b, &doc); err != nil {
					t.Fatalf("%s is not strict JSON: %v", c.file, err)
				}
				e := doc[c.key]["mempalace"]
				if e == nil {
					t.Fatalf("no %s.mempalace in %s", c.key, b)
				}
				if c.target == TargetVSCode {
					validateVSCodeSchema(t, b)
				}
				for k := range e {
					switch k {
					case "type", "command", "args", "env", "url", "headers":
					default:
						t.Errorf("field %q is not in the documented shape", k)
					}
				}
				_, hasType := e["type"]
				if hasType != c.typed {
					t.Errorf("type present=%v, want %v: %v", hasType, c.typed, e)
				}
				switch rung.name {
				case "remote":
					hdr, _ := e["headers"].(map[string]any)
					if e["url"] != r.primary.URL() || hdr["Authorization"] != "Bearer "+c.ref || (c.typed && e["type"] != "http") {
						t.Errorf("remote entry: %v", e)
					}
				default:
					cmd, _ := e["command"].(string)
					if cmd == "" || e["url"] != nil || (c.typed && e["type"] != "stdio") {
						t.Errorf("stdio entry: %v", e)
					}
					if rung.name == "edge" && (cmd != "devbox-config" || fmt.Sprint(e["args"]) != "[edge]") {
						t.Errorf("edge entry: %v", e)
					}
					if _, err := os.Stat(filepath.Join(r.h.Bin, cmd)); err != nil {
						t.Errorf("command %q is not on the home's PATH: %v", cmd, err)
					}
				}
				testbed.NoFileContains(t, r.h.Dir, clientToken)
			})
		}
	}
}

// validateVSCodeSchema checks a user mcp.json against the schema VS Code
// itself validates it with (testdata/vscode-mcp.schema.json says where it
// comes from).
func validateVSCodeSchema(t *testing.T, file []byte) {
	t.Helper()
	b, err := os.ReadFile("testdata/vscode-mcp.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(file, &v); err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(v); err != nil {
		t.Errorf("VS Code's mcp.json schema refuses the rendered file: %v\n%s", err, file)
	}
}

func jsonAt(t *testing.T, b []byte, path ...string) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	if v == nil {
		t.Fatalf("no %v in %s", path, b)
	}
	out, _ := json.Marshal(v)
	return out
}

// topLevelDiff compares two JSON objects key by key (values by meaning):
// the keys only after has, only before has, and those whose value differs.
func topLevelDiff(t *testing.T, before, after []byte) (added, removed, changed []string) {
	t.Helper()
	var b, a map[string]json.RawMessage
	if err := json.Unmarshal(before, &b); err != nil {
		t.Fatalf("before: %v", err)
	}
	if err := json.Unmarshal(after, &a); err != nil {
		t.Fatalf("after: %v", err)
	}
	for k, v := range a {
		old, ok := b[k]
		switch {
		case !ok:
			added = append(added, k)
		default:
			if same, _ := fingerprint.Equal(old, v); !same {
				changed = append(changed, k)
			}
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			removed = append(removed, k)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	sort.Strings(changed)
	return added, removed, changed
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func testbedPlain(s string) string { return ansiRE.ReplaceAllString(s, "") }

// Gemini CLI removes every variable whose name matches its pattern
// (TOKEN, KEY, CERT, …) from a stdio server's environment unless the entry
// sets it; Qwen Code, its fork, starts one with its whole environment. In
// edge mode the edge's local palace must still get each such variable the
// harness has (MEMPALACE_EMBEDDING_API_KEY for a keyed embedder: without
// it every local write fails), and, when the harness lacks one, no literal
// "${…}" in its place. The edge's child is a script that records its
// environment, then runs the local palace.
func TestGeminiAndQwenHandTheEdgeChildItsKeys(t *testing.T) {
	testbed.Integration(t, "drives the real harness CLIs from npm and builds the binaries")
	gemini, _ := harness.ByName(TargetGemini)
	var keys []string // every variable Gemini would remove, but the token the edge keeps to itself
	for _, n := range ladder.ServerVars() {
		if gemini.Redacts.MatchString(n) && n != ladder.EnvRemoteToken {
			keys = append(keys, n)
		}
	}
	for _, c := range []struct{ target, bin string }{{TargetGemini, "gemini"}, {"qwen", "qwen"}} {
		t.Run(c.target, func(t *testing.T) {
			bin := realClient(t, c.bin)
			r := newClientRig(t)
			r.h.Setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
			recorded := filepath.Join(t.TempDir(), "child.env")
			child := filepath.Join(t.TempDir(), "child")
			script := "#!/bin/sh\nenv > '" + recorded + "'\nexec mempalace-mcp \"$@\"\n"
			if err := os.WriteFile(child, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			r.h.Setenv(ladder.EnvEdgeChild, child)
			edge := r.rungs()[2]
			for _, set := range []bool{true, false} {
				t.Run(map[bool]string{true: "set", false: "unset"}[set], func(t *testing.T) {
					for _, k := range keys {
						r.h.Setenv(k, map[bool]string{true: "v-" + k}[set])
					}
					r.render(t, c.target, edge)
					os.Remove(recorded)
					out, errOut, err := r.h.Run(t, 120*time.Second, bin, "mcp", "list")
					env, rerr := os.ReadFile(recorded)
					if rerr != nil {
						t.Fatalf("%s mcp list (%v) never started the edge's child: %v\n%s%s", c.bin, err, rerr, out, errOut)
					}
					got := map[string]string{}
					for _, line := range strings.Split(string(env), "\n") {
						if k, v, ok := strings.Cut(line, "="); ok {
							got[k] = v
						}
					}
					for _, k := range keys {
						if want := map[bool]string{true: "v-" + k}[set]; got[k] != want {
							t.Errorf("%s set to %q in %s's environment reaches the edge's child as %q", k, want, c.bin, got[k])
						}
					}
					if strings.Contains(string(env), "${") {
						t.Errorf("the edge's child sees a literal reference:\n%s", env)
					}
				})
			}
		})
	}
}

// Gemini CLI and Qwen Code save settings.json with every ${VAR} expanded
// on their own `mcp add` (attack101 F2). Today's entries reference no
// variable, so the user's `mcp add` leaves no token in the file and the
// entry stays render's; an entry an older render wrote, with the token's
// reference, comes out of `mcp add` with the token in it, and the next
// render takes it back out (the CLI still lists the entry, connected).
func TestGeminiAndQwenMcpAddLeavesNoTokenInTheFile(t *testing.T) {
	testbed.Integration(t, "drives the real harness CLIs from npm and builds the binaries")
	for _, c := range []struct{ target, bin string }{{TargetGemini, "gemini"}, {"qwen", "qwen"}} {
		rec, _ := harness.ByName(c.target)
		for _, old := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, entry of an older render %v", c.bin, old), func(t *testing.T) {
				bin := realClient(t, c.bin)
				r := newClientRig(t)
				r.h.Setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
				remote := r.rungs()[1]
				file := filepath.Join(r.h.Dir, rec.Location.Dir, rec.Location.Write[0])
				if old {
					renderedOnce(t, r.h.Dir, rec, ladder.Remote, rec.Was[0].Remote, func(e string) string { return e })
				} else {
					r.render(t, c.target, remote)
				}
				for k, v := range remote.env {
					r.h.Setenv(k, v)
				}
				if out, errOut, err := r.h.Run(t, 120*time.Second, bin, "mcp", "add", "-s", "user", "added-x", "mcp-server-memory"); err != nil {
					t.Fatalf("%s mcp add: %v\n%s%s", c.bin, err, out, errOut)
				}
				saved, _ := os.ReadFile(file)
				if old != strings.Contains(string(saved), clientToken) {
					t.Fatalf("%s mcp add (older entry %v) saved the token %v, which this test expects of it:\n%s", c.bin, old, !old, saved)
				}
				res := r.render(t, c.target, remote)
				if old != strings.Contains(strings.Join(res.Warnings, "\n"), rec.Title+" saved this file") {
					t.Errorf("render after %s mcp add: %s %q", c.bin, res.Action, res.Warnings)
				}
				testbed.NoFileContains(t, r.h.Dir, clientToken)
				if fi, _ := os.Stat(file); old && fi.Mode().Perm()&0o077 != 0 {
					t.Errorf("%s held the token and is still mode %04o", file, fi.Mode().Perm())
				}
				counts := r.primaryCounts(t)
				out, errOut, _ := r.h.Run(t, 120*time.Second, bin, "mcp", "list")
				if !regexp.MustCompile(`(?m)mempalace: .* - Connected`).MatchString(testbedPlain(out+errOut)) || !strings.Contains(out+errOut, "added-x") {
					t.Fatalf("%s mcp list after render:\n%s%s", c.bin, out, errOut)
				}
				r.checkPrimary(t, remote, counts)
			})
		}
	}
}
