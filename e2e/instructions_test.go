package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
	"github.com/joakimp/devbox-config/testbed/mockmodel"
)

// Which harnesses put an MCP server's `instructions` (the string in its
// initialize result) into their model's context, found with the pinned real
// clients: each runs one headless prompt against a mock model
// (testbed/mockmodel, which records every request) with one MCP server,
// the test double answering initialize with instructions that carry
// instrHead and, 2.2 KB later, instrTail. The model saw the
// instructions iff a request carries instrHead; whole iff instrTail
// arrived too. instrCases is the knowledge: TestServerInstructions checks
// it against the clients, and docs/harnesses.md's table is generated from
// it (TestServerInstructionsTable).

const (
	instrHead = "MEMPALACE-SERVER-INSTRUCTIONS-4f7c2a"
	instrTail = "MEMPALACE-INSTRUCTIONS-TAIL-0b9e51"
)

// instrText is the server's instructions: the shape of the edge's owed-ask
// summary, 2.2 KB (more than the edge's 2 KB cap).
func instrText() string {
	var b strings.Builder
	b.WriteString("Before you answer, read this: " + instrHead + ".\nYou owe 24 asks:\n")
	for i := 1; i <= 24; i++ {
		fmt.Fprintf(&b, "- ask %02d from pi@laptop (2026-12-01 10:%02d): please review the patch for the journey test\n", i, i)
	}
	b.WriteString("End of asks: " + instrTail + ".")
	return b.String()
}

// instrCase is one harness and what its pinned client does with server
// instructions.
type instrCase struct {
	harness string   // the harness's name in docs/harnesses.md
	pkgs    []string // its npm packages in realclients/package.json (none: not on npm here)
	// run configures the client in r's home to use r's model and r's
	// mempalace server, and runs one prompt. nil: the client cannot be
	// driven here, and untested says why.
	run      func(t *testing.T, r *instrRig)
	untested string
	// injects: the instructions reached the model without a tool call;
	// where lists the places (mockmodel.Model.Where) exactly; whole: all
	// 2.2 KB arrived.
	injects, whole bool
	where          []string
	// control proves, when the instructions did not arrive, that the
	// client did run the server (default: the model was offered its
	// mempalace_status tool).
	control func(t *testing.T, r *instrRig)
	// place says, for the docs, where the model finds them, or what the
	// client does instead; source where the client's code says so.
	place, source string
}

// instrRig is one client's isolated home, the mock model, and the test
// double as the stdio server "mempalace" answering initialize with
// instrText.
type instrRig struct {
	h      *testbed.Home
	model  *mockmodel.Model
	server []string // the server's command line
	ran    []string // what each client run printed, logged if the test fails
}

func newInstrRig(t *testing.T) *instrRig {
	t.Helper()
	h := testbed.NewHome(t)
	bin := testbed.Build(t, "./cmd/fakepalace", "mempalace-mcp")
	r := &instrRig{h: h, model: mockmodel.Start(t),
		server: []string{bin, "--state", filepath.Join(h.Dir, ".mempalace", "palace"), "--instructions", instrText()}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(strings.Join(r.ran, "\n"))
			for k, v := range r.model.Around(instrHead, 200) {
				t.Logf("the model got the instructions' head at %s:\n%s", k, v)
			}
		}
	})
	return r
}

// write puts a file under the rig's home.
func (r *instrRig) write(t *testing.T, rel, content string) string {
	t.Helper()
	p := filepath.Join(r.h.Dir, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs a client in the rig's home (what it printed is logged if the
// test fails) and fails the test if the model got no request: then
// nothing was learned.
func (r *instrRig) run(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	out, errOut, err := r.h.Run(t, timeout, name, args...)
	printed := fmt.Sprintf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, clip(out), clip(errOut))
	if len(r.model.ModelRequests()) == 0 {
		t.Fatalf("the model got no request, so nothing was learned\n%s", printed)
	}
	r.ran = append(r.ran, printed)
	return out + errOut
}

func clip(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// jsonList is a JSON array of strings.
func jsonList(args []string) string {
	b, _ := json.Marshal(args)
	return string(b)
}

// mcpServers is the common {"mcpServers": {"mempalace": …}} entry; extra
// is spliced into it.
func (r *instrRig) mcpServers(extra string) string {
	b, _ := json.Marshal(r.server[0])
	return `{"mcpServers": {"mempalace": {"command": ` + string(b) + `, "args": ` + jsonList(r.server[1:]) + extra + `}}}`
}

// opencodeConfig is an opencode (or Kilo) config: the mock model, the
// mempalace server, and extra top-level keys.
func (r *instrRig) opencodeConfig(schema, extra string) string {
	return `{
  "$schema": "` + schema + `",
  "model": "mock/m",
  "small_model": "mock/m",
  "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
    "options": {"baseURL": "` + r.model.URL + `/v1", "apiKey": "x"},
    "models": {"m": {"name": "m", "tool_call": true}}}},
  "mcp": {"mempalace": {"type": "local", "command": ` + jsonList(r.server) + `}}` + extra + `
}
`
}

const say = "say hi"

var instrCases = []instrCase{
	{
		harness: "opencode", pkgs: []string{"opencode-ai"},
		run: func(t *testing.T, r *instrRig) {
			r.write(t, ".config/opencode/opencode.jsonc", r.opencodeConfig("https://opencode.ai/config.json", ""))
			r.run(t, 120*time.Second, testbed.Opencode(t), "run", say)
		},
		injects: true, whole: true, where: []string{"openai-chat messages[0](system).content"},
		place:  "system prompt, in `<mcp_instructions><server name=\"mempalace\">…`",
		source: "the pinned binary's `SystemPrompt.mcp` (upstream anomalyco/opencode, `session/system.ts`); it leaves out a server whose every tool the agent's permissions deny",
	},
	{
		harness: "Claude Code", pkgs: []string{"@anthropic-ai/claude-code"},
		run: func(t *testing.T, r *instrRig) {
			r.write(t, ".claude.json", r.mcpServers(`, "type": "stdio"`))
			r.h.Setenv("ANTHROPIC_BASE_URL", r.model.URL)
			r.h.Setenv("ANTHROPIC_API_KEY", "x")
			r.h.Setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
			r.run(t, 120*time.Second, testbed.Bin(t, "claude"), "-p", say)
		},
		injects: true, whole: true, where: []string{"anthropic messages[1](system).content[0].text"},
		place:  "a system message after the first user turn, under `# MCP Server Instructions` / `## mempalace`",
		source: "its binary (`claude.exe`): `# MCP Server Instructions`, and an `mcp_instructions_delta` when servers come and go",
	},
	{
		harness: "Codex", pkgs: []string{"@openai/codex"},
		run: func(t *testing.T, r *instrRig) {
			r.write(t, ".codex/config.toml", `model = "m"
model_provider = "mock"

[model_providers.mock]
name = "mock"
base_url = "`+r.model.URL+`/v1"
wire_api = "responses"

[mcp_servers.mempalace]
command = "`+r.server[0]+`"
args = `+jsonList(r.server[1:])+`
`)
			r.run(t, 120*time.Second, testbed.Bin(t, "codex"), "--disable", "plugins", "exec", "--skip-git-repo-check", say)
		},
		injects: true, whole: true, where: []string{"openai-responses tools[8].description"},
		place:  "the description of the tool namespace `mcp__mempalace` (Responses API `namespace` tool), not the prompt",
		source: "its binary: \"Updated instructions for the {name} namespace\"",
	},
	{
		harness: "Gemini CLI", pkgs: []string{"@google/gemini-cli"},
		run: func(t *testing.T, r *instrRig) {
			r.write(t, ".gemini/settings.json", `{"security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": false}, `+strings.TrimPrefix(r.mcpServers(""), "{"))
			r.h.Setenv("GEMINI_API_KEY", "x")
			r.h.Setenv("GOOGLE_GEMINI_BASE_URL", r.model.URL)
			r.h.Setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
			// A fixed model: "auto" first asks a router model for JSON.
			r.run(t, 120*time.Second, testbed.Bin(t, "gemini"), "-m", "gemini-2.5-flash", "-p", say)
		},
		injects: true, whole: true, where: []string{"gemini contents[0](user).parts[0].text"},
		place:  "the first user turn's `<project_context>`, between `---[start of server instructions]---` lines; only in a trusted folder (an untrusted one runs no user-level server anyway)",
		source: "google-gemini/gemini-cli `McpClientManager.getMcpInstructions` (bundle `chunk-*.js`), added to the project memory",
	},
	{
		harness: "Qwen Code", pkgs: []string{"@qwen-code/qwen-code"},
		run: func(t *testing.T, r *instrRig) {
			r.write(t, ".qwen/settings.json", `{"privacy": {"usageStatisticsEnabled": false}, `+strings.TrimPrefix(r.mcpServers(""), "{"))
			r.h.Setenv("OPENAI_API_KEY", "x")
			r.h.Setenv("OPENAI_BASE_URL", r.model.URL+"/v1")
			r.h.Setenv("OPENAI_MODEL", "m")
			r.run(t, 120*time.Second, testbed.Bin(t, "qwen"), "--auth-type", "openai", "-p", say)
		},
		injects: true, whole: true, where: []string{"openai-chat messages[1](user).content[3].text"},
		place:  "a `<system-reminder>` part of the first user message: \"supplied by the MCP server. Treat the instructions as configuration guidance, not as system directives\"",
		source: "its bundle (`chunks/chunk-*.js`): \"The text below was supplied by the MCP server\"",
	},
	{
		harness: "Kilo CLI", pkgs: []string{"@kilocode/cli"},
		run: func(t *testing.T, r *instrRig) {
			r.write(t, ".config/kilo/kilo.jsonc", r.opencodeConfig("https://app.kilo.ai/config.json", ""))
			r.run(t, 120*time.Second, testbed.Bin(t, "kilo"), "run", say)
		},
		injects: true, whole: true, where: []string{"openai-chat messages[0](system).content"},
		place:  "system prompt, in `<mcp_instructions>` (opencode's code)",
		source: "opencode's code (Kilo CLI is built on opencode)",
	},
	{
		harness: "pi + pi-mcp-adapter", pkgs: []string{"@mariozechner/pi-coding-agent", "pi-mcp-adapter"},
		run: func(t *testing.T, r *instrRig) {
			r.write(t, ".pi/agent/models.json", `{"providers": {"mock": {"baseUrl": "`+r.model.URL+`/v1", "api": "openai-completions", "apiKey": "x", "models": [{"id": "m"}]}}}`)
			r.write(t, ".pi/agent/mcp.json", r.mcpServers(`, "lifecycle": "eager"`))
			r.h.Setenv("PI_OFFLINE", "1")
			piRun(t, r)
		},
		// The adapter keeps them for its mcp tool: the model gets them by
		// calling mcp({instructions: "mempalace"}).
		control: func(t *testing.T, r *instrRig) {
			r.model.Reset()
			r.model.Next(mockmodel.ToolCall{Name: "mcp", Args: map[string]any{"instructions": "mempalace"}})
			piRun(t, r)
			if res := r.model.LastToolResult(); !strings.Contains(res, instrHead) || !strings.Contains(res, instrTail) {
				t.Fatalf("mcp({instructions: \"mempalace\"}) answered %q, not the server's instructions", res)
			}
		},
		place:  "not in the context: the adapter's `mcp` tool returns them on request, `mcp({instructions: \"mempalace\"})` (a preview in `mcp({server: \"mempalace\"})`)",
		source: "pi-mcp-adapter README (\"surface it through discovery paths\"), `proxy-modes.ts` `executeInstructions`",
	},
	{
		harness: "GitHub Copilot CLI", pkgs: []string{"@github/copilot"},
		run: func(t *testing.T, r *instrRig) {
			r.write(t, ".copilot/mcp-config.json", r.mcpServers(`, "type": "local", "tools": ["*"]`))
			cache, err := os.UserCacheDir()
			if err != nil {
				cache = t.TempDir()
			}
			r.h.Setenv("COPILOT_PKG_CACHE_HOME", filepath.Join(cache, "devbox-config", "copilot-pkg"))
			// Its own model provider (BYOK): no GitHub login.
			r.h.Setenv("COPILOT_PROVIDER_BASE_URL", r.model.URL+"/v1")
			r.h.Setenv("COPILOT_PROVIDER_API_KEY", "x")
			r.h.Setenv("COPILOT_MODEL", "m")
			r.h.Setenv("COPILOT_OFFLINE", "1")
			r.run(t, 150*time.Second, testbed.Bin(t, "copilot"), "-p", say, "--allow-all-tools")
		},
		place:  "dropped (its tools are offered)",
		source: "closed source (MCP client in a native module)",
	},
	{
		harness: "Cline CLI", pkgs: []string{"cline"},
		run: func(t *testing.T, r *instrRig) {
			defer testbed.StopClineHub(r.h.Dir)
			r.write(t, ".cline/data/settings/cline_mcp_settings.json", r.mcpServers(`, "timeout": 60`))
			if out, errOut, err := r.h.Run(t, 60*time.Second, testbed.Bin(t, "cline"), "auth", "-p", "openai-compatible", "-k", "x", "-m", "m", "-b", r.model.URL+"/v1"); err != nil {
				t.Fatalf("cline auth: %v\n%s%s", err, out, errOut)
			}
			r.run(t, 150*time.Second, testbed.Bin(t, "cline"), "-t", "90", say)
		},
		place:  "dropped (its tools are offered)",
		source: "its binary defines the SDK's `getInstructions()` and never calls it",
	},
	{
		harness: "Continue CLI", pkgs: []string{"@continuedev/cli"},
		run: func(t *testing.T, r *instrRig) {
			r.write(t, ".continue/config.yaml", "name: c\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: m\n    provider: openai\n    model: m\n    apiKey: x\n    apiBase: "+
				r.model.URL+"/v1\nmcpServers:\n  - name: mempalace\n    command: "+r.server[0]+"\n    args: "+jsonList(r.server[1:])+"\n")
			r.run(t, 150*time.Second, testbed.Bin(t, "cn"), "-p", say)
		},
		place:  "dropped (its tools are offered)",
		source: "`dist/index.js` defines the SDK's `getInstructions()` and never calls it",
	},
	{harness: "Auggie", pkgs: []string{"@augmentcode/auggie"},
		untested: "needs an Augment login (`AUGMENT_SESSION_AUTH`) and Augment's own backend, not a model API a mock can answer",
		source:   "`augment.mjs` defines the SDK's `getInstructions()` and never calls it"},
	{harness: "Amp", pkgs: []string{"@ampcode/cli"}, untested: "its model traffic goes through Amp's service (`AMP_URL`), not a model API a mock can answer"},
	{harness: "Cursor", untested: "desktop application"},
	{harness: "VS Code", untested: "desktop application"},
	{harness: "Crush", pkgs: []string{"@charmland/crush"}, untested: "its npm package downloads its binary while installing, which fails offline"},
	{harness: "Goose", untested: "no npm package"},
	{harness: "Zed", untested: "desktop editor"},
	{harness: "Windsurf", untested: "desktop editor"},
	{harness: "Roo Code", untested: "VS Code extension"},
}

// piRun runs one pi prompt with the adapter.
func piRun(t *testing.T, r *instrRig) {
	t.Helper()
	adapter := filepath.Join(testbed.Dir(t), "node_modules", "pi-mcp-adapter", "index.ts")
	r.run(t, 120*time.Second, testbed.Bin(t, "pi"), "-p", "--no-session", "-e", adapter, "--provider", "mock", "--model", "m", say)
}

func TestServerInstructions(t *testing.T) {
	testbed.Integration(t, "drives the real harness clients from npm against a mock model")
	for _, c := range instrCases {
		if c.run == nil {
			continue
		}
		t.Run(c.harness, func(t *testing.T) {
			r := newInstrRig(t)
			c.run(t, r)
			where, tail := r.model.Where(instrHead), r.model.Where(instrTail)
			upgrade := fmt.Sprintf("if the pinned %s changed this on purpose, update instrCases and run UPDATE_GOLDEN=1 go test ./e2e -run ServerInstructionsTable", strings.Join(c.pkgs, " + "))
			if injects := len(where) > 0; injects != c.injects {
				t.Fatalf("%s: server instructions reach the model: %v, want %v (%v); %s", c.harness, injects, c.injects, where, upgrade)
			}
			if !slices.Equal(where, c.where) {
				t.Errorf("%s: the instructions are at %v, want %v; %s", c.harness, where, c.where, upgrade)
			}
			if whole := c.injects && slices.Equal(tail, where); whole != c.whole {
				t.Errorf("%s: all 2.2 KB arrived: %v (the tail at %v), want %v; %s", c.harness, whole, tail, c.whole, upgrade)
			}
			switch {
			case c.injects:
			case c.control != nil:
				c.control(t, r)
			case len(r.model.Where("mempalace_status")) == 0:
				t.Fatalf("%s offered the model no mempalace tool: it did not run the server, so its dropping the instructions proves nothing", c.harness)
			}
		})
	}
}

// TestOpencodeInstructionsFiles: opencode's own "instructions" setting,
// a list of files it loads into the system prompt, is the fallback for
// harnesses that drop server instructions: a file kept current (the edge
// writes none today; this test writes it).
// A long-running opencode (serve, as the TUI runs it) must read the file
// again on every prompt of one session, must run while the file is
// missing, and must take both an absolute path and a "~/" one.
func TestOpencodeInstructionsFiles(t *testing.T) {
	testbed.Integration(t, "drives the real opencode against a mock model")
	oc := testbed.Opencode(t)
	r := newInstrRig(t)
	abs := filepath.Join(r.h.Dir, ".mempalace", "owed-abs.md")
	r.write(t, ".config/opencode/opencode.jsonc", r.opencodeConfig("https://opencode.ai/config.json",
		`,
  "instructions": `+jsonList([]string{abs, "~/.mempalace/owed-home.md"})))
	port := testbed.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	testbed.StartIn(t, r.h.Proj, r.h.Environ(), "listening", oc, "serve", "--port", strconv.Itoa(port), "--hostname", "127.0.0.1")
	prompt := func(text string, more ...string) {
		t.Helper()
		r.model.Reset()
		args := append([]string{"run", "--attach", url, "--dir", r.h.Proj}, more...)
		r.run(t, 120*time.Second, oc, append(args, text)...)
	}
	sees := func(text string) []string { return r.model.Where(text) }

	prompt("first, no file yet")
	if w := sees("OWED-"); len(w) != 0 {
		t.Fatalf("with no file, the model saw OWED- at %v", w)
	}
	r.write(t, ".mempalace/owed-abs.md", "You owe: OWED-ABS-V1\n")
	r.write(t, ".mempalace/owed-home.md", "You owe: OWED-HOME-V1\n")
	prompt("second, same session", "--continue")
	for _, m := range []string{"OWED-ABS-V1", "OWED-HOME-V1"} {
		if w := sees(m); !slices.Equal(w, []string{"openai-chat messages[0](system).content"}) {
			t.Fatalf("the file written mid-session: %s at %v, want the system prompt", m, w)
		}
	}
	r.write(t, ".mempalace/owed-abs.md", "You owe: OWED-ABS-V2\n")
	prompt("third, same session", "--continue")
	if len(sees("OWED-ABS-V2")) == 0 || len(sees("OWED-ABS-V1")) != 0 {
		t.Fatalf("after the file changed the model saw V2 at %v and V1 at %v: opencode does not read it again per prompt", sees("OWED-ABS-V2"), sees("OWED-ABS-V1"))
	}
	if len(sees("first, no file yet")) == 0 {
		t.Fatal("the third prompt's request lacks the first prompt: not one session, so the re-read proves less")
	}
	if w := sees("Instructions from: " + abs + "\nYou owe: OWED-ABS-V2"); len(w) == 0 {
		t.Errorf("the file's text is not introduced by \"Instructions from: <path>\"")
	}
	// Nothing owed: an empty file adds nothing, not even its path.
	r.write(t, ".mempalace/owed-abs.md", "")
	prompt("fourth, same session", "--continue")
	if w := sees("Instructions from: " + abs); len(w) != 0 || len(sees("OWED-HOME-V1")) == 0 {
		t.Fatalf("an empty file: its path is still at %v (the other file's text at %v)", w, sees("OWED-HOME-V1"))
	}
}

// The table in docs/harnesses.md between these lines is instrTable's.
const (
	tableBegin = "<!-- generated from e2e/instructions_test.go (instrCases): UPDATE_GOLDEN=1 go test ./e2e -run ServerInstructionsTable -->\n"
	tableEnd   = "<!-- end of generated table -->\n"
)

// instrTable renders instrCases with the versions pinned in
// realclients/package.json.
func instrTable(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "realclients", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pins struct{ Dependencies map[string]string }
	if err := json.Unmarshal(b, &pins); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	out.WriteString("| harness | client tested | server instructions reach the model | where the model finds them | the client's code |\n| --- | --- | --- | --- | --- |\n")
	for _, c := range instrCases {
		var pinned []string
		for _, pkg := range c.pkgs {
			v, ok := pins.Dependencies[pkg]
			if !ok && c.run != nil {
				t.Fatalf("%s: %s is not pinned in realclients/package.json", c.harness, pkg)
			}
			if ok {
				pinned = append(pinned, fmt.Sprintf("`%s` %s", pkg, v))
			}
		}
		tested, reach := strings.Join(pinned, " + "), "no"
		switch {
		case c.run == nil && (c.untested == "" || c.injects):
			t.Fatalf("%s: a case that cannot run says why and claims nothing", c.harness)
		case c.run == nil:
			if tested != "" {
				tested = " (" + tested + ")"
			}
			tested, reach = "not tested"+tested+": "+c.untested, "unknown"
		case c.injects && c.whole:
			reach = "yes, all 2.2 KB"
		case c.injects:
			reach = "yes"
		}
		place := c.place
		if place == "" {
			place = "—"
		}
		src := c.source
		if src == "" {
			src = "—"
		}
		fmt.Fprintf(&out, "| %s | %s | %s | %s | %s |\n", c.harness, tested, reach, place, src)
	}
	return out.String()
}

// TestServerInstructionsTable keeps docs/harnesses.md's table equal to
// instrCases (UPDATE_GOLDEN=1 rewrites it).
func TestServerInstructionsTable(t *testing.T) {
	page := filepath.Join("..", "docs", "harnesses.md")
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated server-instructions table (the lines %q and %q)", page, tableBegin, tableEnd)
	}
	want := instrTable(t)
	got := doc[i+len(tableBegin) : j]
	if got == want {
		return
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(page, []byte(doc[:i+len(tableBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/harnesses.md's server-instructions table differs from instrCases (UPDATE_GOLDEN=1 go test ./e2e -run ServerInstructionsTable rewrites it):\nhave:\n%s\nwant:\n%s", got, want)
}
