package render

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/testbed"
	"github.com/joakimp/devbox-config/testbed/mockmodel"
)

// Seven more real clients, one case each (TestRealClientsEveryRung): each
// gets a file of the user's own (a comment where its format has them and a
// hand-added server, "memory", the real server-memory), render writes the
// rung, and the client itself shows what it loaded. Where the client can
// connect offline the mempalace server must be connected and, in remote
// and edge mode, the primary must see authorized requests; where it
// cannot, the narrowest real behaviour it shows is used, and the case says
// which. The token must be in no file, the user's comment and server must
// survive the client, and render must find nothing to redo afterwards.

// clientCase is one real client.
type clientCase struct {
	target, bin string
	// file is the user's file, in the harness's directory ("" : the
	// record's Location.Write[0]); render must edit it, the one the client reads.
	file string
	// user is the user's file before render; the model server's URL is
	// %[1]s (for clients that need a model to run at all).
	user    string
	comment string // a comment of user's that must survive ("" : none)
	env     map[string]string
	// check runs the client and returns the servers it loaded and whether
	// the mempalace server was reached (only when connects).
	check    func(t *testing.T, r *clientRig, m *mockmodel.Model) (servers []string, reached bool)
	connects bool
}

func clientCases(t *testing.T) []clientCase {
	memory := filepath.Join(testbed.Dir(t), "node_modules", ".bin", "mcp-server-memory")
	return []clientCase{
		{
			// Copilot CLI starts MCP servers only after a GitHub login, so
			// offline the narrowest real behaviour is its own reading of the
			// file: `copilot mcp list --json` prints the servers as loaded.
			target: "copilot", bin: "copilot",
			user:    `{ // mine` + "\n" + `"mcpServers": {"memory": {"type": "local", "command": "` + memory + `", "args": [], "tools": ["*"]}}}` + "\n",
			comment: "// mine",
			env:     map[string]string{"COPILOT_PKG_CACHE_HOME": sharedCache(t, "copilot-pkg")},
			check: func(t *testing.T, r *clientRig, _ *mockmodel.Model) ([]string, bool) {
				out := r.run(t, 120, "copilot", "mcp", "list", "--json")
				var list struct {
					MCPServers map[string]struct {
						Type    string            `json:"type"`
						Headers map[string]string `json:"headers"`
					} `json:"mcpServers"`
				}
				if err := firstJSON(out, &list); err != nil {
					t.Fatalf("copilot mcp list --json: %v\n%s", err, out)
				}
				if e, ok := list.MCPServers["mempalace"]; ok && e.Type == "http" && e.Headers["Authorization"] != "Bearer ${MEMPALACE_REMOTE_TOKEN}" {
					t.Errorf("copilot loads the remote header as %q", e.Headers["Authorization"])
				}
				return keys(list.MCPServers), false
			},
		},
		{
			// Cline has no command that lists servers: a prompt loads them
			// (its hub daemon starts each one) and offers their tools to the
			// model, here a local mock that records them.
			target: "cline", bin: "cline",
			user: `{"mcpServers": {"memory": {"command": "` + memory + `", "args": [], "timeout": 60}}}` + "\n",
			check: func(t *testing.T, r *clientRig, m *mockmodel.Model) ([]string, bool) {
				defer testbed.StopClineHub(r.h.Dir)
				r.run(t, 60, "cline", "auth", "-p", "openai-compatible", "-k", "x", "-m", "m", "-b", m.URL+"/v1")
				r.run(t, 150, "cline", "-t", "90", "say hi please")
				return servers(m), m.OfferedAny("mempalace_status")
			},
			connects: true,
		},
		{
			// The user's comment is the file's last line, without a
			// newline: qwen strips comments before JSON.parse, so it loads.
			target: "qwen", bin: "qwen",
			user:    `{"mcpServers": {"memory": {"command": "` + memory + `"}}}` + "\n// mine",
			comment: "// mine",
			check: func(t *testing.T, r *clientRig, _ *mockmodel.Model) ([]string, bool) {
				return listed(r.run(t, 120, "qwen", "mcp", "list"), `(?m)^\S*\s*([\w-]+): .* - (Connected|Disconnected|Disabled)`, "Connected")
			},
			connects: true,
		},
		{
			target: "kilo", bin: "kilo",
			user:    `{ // mine` + "\n" + `"mcp": {"memory": {"type": "local", "command": ["` + memory + `"]}}}` + "\n",
			comment: "// mine",
			check: func(t *testing.T, r *clientRig, _ *mockmodel.Model) ([]string, bool) {
				return listed(r.run(t, 120, "kilo", "mcp", "list"), `(?m)^\S+\s+[✓✗]\s+([\w-]+)\s+(\w+)`, "connected")
			},
			connects: true,
		},
		{
			// Kilo reads opencode.json over kilo.jsonc: the entry there (here
			// the solitary one, adopted) is the one render keeps in step. Kilo
			// rewrites a .json file without its comments: none here.
			target: "kilo", bin: "kilo", file: "opencode.json",
			user: `{"mcp": {"memory": {"type": "local", "command": ["` + memory + `"]}, "mempalace": {"type": "local", "command": ["mempalace-mcp"], "enabled": true}}}` + "\n",
			check: func(t *testing.T, r *clientRig, _ *mockmodel.Model) ([]string, bool) {
				return listed(r.run(t, 120, "kilo", "mcp", "list"), `(?m)^\S+\s+[✓✗]\s+([\w-]+)\s+(\w+)`, "connected")
			},
			connects: true,
		},
		{
			// Auggie never connects offline: `auggie mcp list --json` is its
			// reading of the file.
			target: "auggie", bin: "auggie",
			user:    `{ // mine` + "\n" + `"mcpServers": {"memory": {"command": "` + memory + `", "args": []}}}` + "\n",
			comment: "// mine",
			check: func(t *testing.T, r *clientRig, _ *mockmodel.Model) ([]string, bool) {
				out := r.run(t, 120, "auggie", "mcp", "list", "--json")
				var list struct {
					Servers []struct{ Name string } `json:"servers"`
				}
				if err := firstJSON(out, &list); err != nil {
					t.Fatalf("auggie mcp list --json: %v\n%s", err, out)
				}
				var names []string
				for _, s := range list.Servers {
					names = append(names, s.Name)
				}
				return names, false
			},
		},
		{
			// `amp mcp doctor` waits for its MCP service and connects every
			// server; AMP_URL points its account service at a closed port.
			target: "amp", bin: "amp",
			user:    `{ // mine` + "\n" + `"amp.mcpServers": {"memory": {"command": "` + memory + `", "args": []}}}` + "\n",
			comment: "// mine",
			env:     map[string]string{"AMP_URL": "http://127.0.0.1:9/", "AMP_API_KEY": "x"},
			check: func(t *testing.T, r *clientRig, _ *mockmodel.Model) ([]string, bool) {
				return listed(r.run(t, 120, "amp", "mcp", "doctor"), `(?m)^([\w-]+) \(user settings\): (\w+)`, "connected")
			},
			connects: true,
		},
		{
			// Amp reads settings.jsonc when there is no settings.json: render
			// edits it, and creates no settings.json that would hide it.
			target: "amp", bin: "amp", file: "settings.jsonc",
			user:    `{ // mine` + "\n" + `"amp.mcpServers": {"memory": {"command": "` + memory + `", "args": []}},}` + "\n",
			comment: "// mine",
			env:     map[string]string{"AMP_URL": "http://127.0.0.1:9/", "AMP_API_KEY": "x"},
			check: func(t *testing.T, r *clientRig, _ *mockmodel.Model) ([]string, bool) {
				return listed(r.run(t, 120, "amp", "mcp", "doctor"), `(?m)^([\w-]+) \(user settings\): (\w+)`, "connected")
			},
			connects: true,
		},
		{
			// Continue's cn lists servers only in its terminal UI: a headless
			// prompt (cn -p) loads them and offers their tools to the model,
			// a local mock that records them. The file has a %YAML 1.2
			// directive and its --- marker, which cn loads and render keeps.
			target: "continue", bin: "cn",
			user:    "# mine\n%%YAML 1.2\n---\nname: my config\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: m\n    provider: openai\n    model: m\n    apiKey: x\n    apiBase: %[1]s\nmcpServers:\n  - name: memory # hand-added\n    command: " + memory + "\n",
			comment: "# mine\n%YAML 1.2\n---\n",
			check: func(t *testing.T, r *clientRig, m *mockmodel.Model) ([]string, bool) {
				r.run(t, 150, "cn", "-p", "say hi please")
				return servers(m), m.OfferedAny("mempalace_status")
			},
			connects: true,
		},
	}
}

func TestRealClientsEveryRung(t *testing.T) {
	testbed.Integration(t, "drives the real harness CLIs from npm and builds the binaries")
	for _, c := range clientCases(t) {
		name := c.target
		if c.file != "" {
			name += " " + c.file
		}
		t.Run(name, func(t *testing.T) {
			realClient(t, c.bin)
			rec, ok := harness.ByName(c.target)
			if !ok {
				t.Fatalf("no harness record %q", c.target)
			}
			r := newClientRig(t)
			for k, v := range c.env {
				r.h.Setenv(k, v)
			}
			m := mockmodel.Start(t)
			env := harness.Env{Home: r.h.Dir, Lookup: r.h.Lookup}
			base := c.file
			if base == "" {
				base = rec.Location.Write[0]
			}
			file := filepath.Join(rec.Location.DirPath(env), base)
			os.MkdirAll(filepath.Dir(file), 0o755)
			user := c.user
			if strings.Contains(user, "%[1]s") {
				user = fmt.Sprintf(user, m.URL+"/v1")
			}
			if err := os.WriteFile(file, []byte(user), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, rung := range r.rungs() {
				t.Run(rung.name, func(t *testing.T) {
					if res := r.render(t, c.target, rung); res.File != file {
						t.Errorf("render wrote %s, not the user's %s", res.File, file)
					}
					m.Reset()
					counts := r.primaryCounts(t)
					servers, reached := c.check(t, r, m)
					if c.connects && !reached {
						// opencode's first tool list has been seen to fail on a
						// loaded two-core machine (testbed.OpencodeMCPStatus);
						// Kilo is its fork. A broken server fails twice.
						t.Logf("%s did not reach mempalace at once; asking again", c.bin)
						m.Reset()
						servers, reached = c.check(t, r, m)
					}
					if !slices.Contains(servers, "mempalace") {
						t.Fatalf("%s did not load the mempalace server (it shows %v)", c.bin, servers)
					}
					if !slices.Contains(servers, "memory") {
						t.Errorf("%s lost the hand-added server (it shows %v)", c.bin, servers)
					}
					if c.connects {
						if !reached {
							t.Fatalf("%s did not reach the mempalace server", c.bin)
						}
						r.checkPrimary(t, rung, counts)
					}
					after, _ := os.ReadFile(file)
					if c.comment != "" && !strings.Contains(string(after), c.comment) {
						t.Errorf("the user's comment %q is gone after %s ran:\n%s", c.comment, c.bin, after)
					}
					if again := r.render(t, c.target, rung); again.Action != "unchanged" || len(again.Changes) != 0 {
						t.Errorf("render after %s ran: %s, %d changes", c.bin, again.Action, len(again.Changes))
					}
					testbed.NoFileContains(t, r.h.Dir, clientToken)
				})
			}
		})
	}
}

// run runs a real client in the rig's home and returns what it printed.
func (r *clientRig) run(t *testing.T, seconds int, bin string, args ...string) string {
	t.Helper()
	out, errOut, err := r.h.Run(t, time.Duration(seconds)*time.Second, realClient(t, bin), args...)
	t.Logf("%s %s: %v\n%s%s", bin, strings.Join(args, " "), err, tail(out, 1500), tail(errOut, 1500))
	return testbedPlain(out + errOut)
}

// firstJSON decodes the first JSON object in what a client printed (its
// warnings may follow it).
func firstJSON(out string, v any) error {
	i := strings.Index(out, "{")
	if i < 0 {
		return fmt.Errorf("no JSON object")
	}
	return json.NewDecoder(strings.NewReader(out[i:])).Decode(v)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// listed parses a client's server list: re's first group is a server's
// name, its second the state, and reached is the mempalace server's state
// being ok.
func listed(out, re, ok string) (servers []string, reached bool) {
	for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(out, -1) {
		servers = append(servers, m[1])
		if m[1] == "mempalace" && m[2] == ok {
			reached = true
		}
	}
	return servers, reached
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// sharedCache is a directory under the user's cache kept across runs
// (Copilot unpacks ~235 MB there once).
func sharedCache(t *testing.T, name string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = t.TempDir()
	}
	return filepath.Join(dir, "devbox-config", name)
}

// servers are the MCP servers whose tools the model was offered: mempalace
// by its status tool, memory (server-memory) by create_entities.
func servers(m *mockmodel.Model) []string {
	var out []string
	if m.OfferedAny("mempalace_status") {
		out = append(out, "mempalace")
	}
	if m.OfferedAny("create_entities") {
		out = append(out, "memory")
	}
	return out
}

// Crush, Goose, Zed, Windsurf and Roo Code have no client that runs here:
// each rung's entry is checked against the shape its published docs give
// (fields, the remote key, the token's reference or the bridge), and must
// hold no token.
func TestDocumentedShapes(t *testing.T) {
	for _, c := range []struct {
		target, missing string
		fields          []string // the documented fields of an entry
		remote          func(e map[string]any, url string) bool
	}{
		{"crush", "Crush: its npm package (@charmland/crush) downloads its release binary while installing, which fails offline",
			[]string{"type", "command", "args", "env", "url", "headers"},
			func(e map[string]any, url string) bool {
				return e["type"] == "http" && e["url"] == url && header(e) == "Bearer $MEMPALACE_REMOTE_TOKEN"
			}},
		{"goose", "Goose: a Rust binary with no npm package (its YAML library reads every rung instead: TestGooseReadsEveryRung)",
			[]string{"name", "type", "cmd", "args", "envs", "env_keys", "enabled", "timeout"},
			func(e map[string]any, _ string) bool {
				return e["type"] == "stdio" && e["cmd"] == "devbox-config" && fmt.Sprint(e["args"]) == "[bridge]" && fmt.Sprint(e["env_keys"]) == "[MEMPALACE_REMOTE_URL MEMPALACE_REMOTE_TOKEN]"
			}},
		{"zed", "Zed: a desktop editor with no npm package or headless MCP listing",
			[]string{"command", "args", "env"},
			func(e map[string]any, _ string) bool {
				return e["command"] == "devbox-config" && fmt.Sprint(e["args"]) == "[bridge]"
			}},
		{"windsurf", "Windsurf: a desktop editor with no npm package or headless MCP listing",
			[]string{"command", "args", "env", "serverUrl", "headers"},
			func(e map[string]any, url string) bool {
				return e["serverUrl"] == url && e["url"] == nil && header(e) == "Bearer ${env:MEMPALACE_REMOTE_TOKEN}"
			}},
		{"roo", "Roo Code: a VS Code extension, not runnable without VS Code",
			[]string{"type", "command", "args", "env", "url", "headers"},
			func(e map[string]any, url string) bool {
				return e["type"] == "streamable-http" && e["url"] == url && header(e) == "Bearer ${env:MEMPALACE_REMOTE_TOKEN}"
			}},
	} {
		t.Run(c.target, func(t *testing.T) {
			t.Run("real-client", func(t *testing.T) {
				t.Skip("no real client: " + c.missing + "; the documented shape is checked instead")
			})
			rec, ok := harness.ByName(c.target)
			if !ok {
				t.Fatalf("no harness record %q", c.target)
			}
			home := t.TempDir()
			env := map[string]string{}
			o := func() Options {
				return Options{Home: home, HomeFromFlag: true, Env: envOf(env), LookPath: found, Targets: []string{c.target}}
			}
			file := filepath.Join(rec.Location.DirPath(harness.Env{Home: home, HomeFromFlag: true}), rec.Location.Write[0])
			for _, rung := range []string{"solitary", "remote", "edge"} {
				t.Run(rung, func(t *testing.T) {
					if rung != "solitary" {
						env["MEMPALACE_REMOTE_URL"], env["MEMPALACE_REMOTE_TOKEN"] = "https://palace.example.org/mcp", "tok-SECRET-doc"
					}
					if rung == "edge" {
						env["MEMPALACE_EDGE"] = "1"
					}
					if res, _, err := Run(o(), false); err != nil || res[0].Kept() {
						t.Fatalf("render: %v %+v", err, res)
					}
					data, _ := os.ReadFile(file)
					doc, err := parse(rec, data)
					if err != nil {
						t.Fatalf("%s does not parse as %s: %v", file, rec.Format, err)
					}
					raw, _ := doc.Get(rec.Pointer()...)
					var e map[string]any
					if err := json.Unmarshal(raw, &e); err != nil || e == nil {
						t.Fatalf("no entry at %v in %s", rec.Pointer(), data)
					}
					for k := range e {
						if !slices.Contains(c.fields, k) {
							t.Errorf("field %q is not in %s's documented shape", k, rec.Title)
						}
					}
					switch rung {
					case "remote":
						if !c.remote(e, "https://palace.example.org/mcp") {
							t.Errorf("remote entry: %v", e)
						}
					case "edge":
						if cmd := fmt.Sprint(e["command"], e["cmd"]); !strings.Contains(cmd, "devbox-config") || !strings.Contains(fmt.Sprint(e["args"]), "edge") {
							t.Errorf("edge entry: %v", e)
						}
					default:
						if cmd := fmt.Sprint(e["command"], e["cmd"]); !strings.Contains(cmd, "mempalace-mcp") {
							t.Errorf("solitary entry: %v", e)
						}
					}
					if strings.Contains(string(data), "tok-SECRET-doc") {
						t.Fatalf("the token is in %s", file)
					}
				})
			}
		})
	}
}

func header(e map[string]any) string {
	h, _ := e["headers"].(map[string]any)
	s, _ := h["Authorization"].(string)
	return s
}
