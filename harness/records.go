package harness

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/templates"
)

// All is every harness, in the order render runs them. docs/harnesses.md
// is this list for people, with the version of each real client that
// proves its record. The records are built once (the entries hand
// servers ladder.ServerVars, Gemini's matched by a case-folding pattern:
// 0.4 ms a build, which ByName, called per target at every container
// start, paid again each time); the slice is shared, not to be changed.
func All() []Record { return records() }

var records = sync.OnceValue(build)

func build() []Record {
	// serverVars is every variable a server reads, for Codex's env_vars;
	// localVars the same less the primary's token, for a plain local
	// mempalace-mcp, which never talks to the primary (the edge keeps the
	// token from its own child too: ladder.ChildEnviron).
	serverVars, _ := json.Marshal(ladder.ServerVars())
	localVars, _ := json.Marshal(slices.DeleteFunc(ladder.ServerVars(), func(n string) bool { return n == ladder.EnvRemoteToken }))
	// geminiRedacts is Gemini CLI's NEVER_ALLOWED_NAME_PATTERNS (0.61.0).
	// geminiRef is its reference that expands to "" when a variable is
	// unset (envVarResolver's ${NAME:-default}).
	geminiRedacts := regexp.MustCompile(`(?i)TOKEN|SECRET|PASSWORD|PASSWD|KEY|AUTH|CREDENTIAL|CREDS|PRIVATE|CERT`)
	geminiRef := "${%s:-}"
	return []Record{
		{
			Name: "opencode", Title: "opencode",
			Location: Location{XDG: true, Dir: "opencode",
				Files: []string{"config.json", "opencode.json", "opencode.jsonc"},
				Write: []string{"opencode.jsonc", "opencode.json"}},
			Format: JSONC, Key: []string{"mcp"}, Scope: Always, EnvRef: "{env:%s}",
			Entries: Entries{
				Solitary: `{"type": "local", "command": ["mempalace-mcp"], "enabled": true}`,
				Remote:   `{"type": "remote", "url": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}", "Connection": "close"}, "oauth": false, "enabled": true}`,
				Edge:     `{"type": "local", "command": ["devbox-config", "edge"], "environment": {"MEMPALACE_EDGE_HARNESS": "opencode"}, "enabled": true}`,
			},
			Schema: "https://opencode.ai/config.json",
			Adopts: fromOldGenerator,
			Traps: []string{
				"inserts \"$schema\" into a file without one, rewriting it (older builds dropped comments and wrote expanded secrets): render writes it into a file it creates, never into an existing one (every byte outside the entry stays)",
				"an unset {env:VAR} silently becomes \"\"",
				"its Bun (1.3.14) pools the socket of a non-2xx answer that said Connection: close; serve answers the SDK's GET /mcp with one and closes, and the next tools/list fails: the remote entry sends Connection: close",
				"deep-merges mcp.mempalace across config.json < opencode.json < opencode.jsonc",
			},
		},
		{
			Name: "pi", Title: "pi (settings)",
			Location: Location{Dir: ".pi/agent", DirEnv: "PI_CODING_AGENT_DIR", Write: []string{"settings.json"}},
			Format:   JSON, Scope: FileExists, Lock: "pi",
			Settings: templates.PiSettings,
			Traps:    []string{"rewrites settings.json itself under settings.json.lock; a comment makes it ignore the file"},
		},
		{
			Name: "pi-mcp", Title: "pi + pi-mcp-adapter",
			Location: Location{Dir: ".pi/agent", DirEnv: "PI_CODING_AGENT_DIR", Write: []string{"mcp.json"}},
			Format:   JSON, Key: []string{"mcpServers"}, Scope: FileExists,
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp"}`,
				Remote:   `{"url": {{json .URL}}, "auth": "bearer", "bearerTokenEnv": "MEMPALACE_REMOTE_TOKEN"}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "pi"}}`,
			},
			Traps: []string{
				"pi's own MemPalace extension has no edge branch: doctor reports it (docs/upstream.md)",
				"pi-mcp-adapter merges ~/.config/mcp/mcp.json's mempalace entry field by field under this file's: render and doctor warn about a field that would leak in (a cwd, \"inheritEnv\": false)",
			},
			MergedFrom: ".config/mcp/mcp.json",
			MergeDrops: map[string][]string{
				"command": {"url", "headers", "requestHeadersCommand", "caFile", "auth", "bearerToken", "bearerTokenEnv", "bearerTokenStore", "oauth", "httpTransport", "socket"},
				"url":     {"command", "args", "env", "cwd", "pluginDataDir", "literalEnv", "inheritEnv", "socket"},
			},
		},
		{
			Name: "claude-code", Title: "Claude Code",
			Location: Location{DirEnv: "CLAUDE_CONFIG_DIR", Write: []string{".claude.json"}, Marker: ".claude"},
			Format:   JSON, Key: []string{"mcpServers"}, Scope: OptIn, EnvRef: "${%s}", Lock: "Claude Code",
			Entries: Entries{
				Solitary: `{"type": "stdio", "command": "mempalace-mcp", "args": []}`,
				Remote:   `{"type": "http", "url": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}}`,
				Edge:     `{"type": "stdio", "command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "claude-code"}}`,
			},
			Traps: []string{"rewrites ~/.claude.json itself (under ~/.claude.json.lock): render takes the lock and fingerprints only the entry"},
			Ignores: []Ignore{
				{Path: []string{"projects", "*", "mcpServers", Server}, When: Present, Remote: true,
					Why: "is a local-scope entry (what `claude mcp add` writes by default): in {key} it wins over render's user-scope entry, so Claude Code there runs it instead of the primary's",
					Fix: "in {key} run `claude mcp remove mempalace -s local`, or delete projects[\"{key}\"].mcpServers.mempalace from the file"},
				{Path: []string{"projects", "*", "disabledMcpServers"}, When: Lists,
					Why: "names mempalace: Claude Code shows it \"Disabled for this project\" in {key} and gives no MemPalace tools there",
					Fix: "re-enable it in {key} (/mcp in Claude Code), or take \"mempalace\" out of projects[\"{key}\"].disabledMcpServers"},
			},
		},
		{
			Name: "codex", Title: "Codex",
			Location: Location{Dir: ".codex", DirEnv: "CODEX_HOME", Write: []string{"config.toml"}},
			Format:   TOML, Key: []string{"mcp_servers"}, Scope: OptIn, FixedEnv: true,
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp", "env_vars": ` + string(localVars) + `}`,
				Remote:   `{"url": {{json .URL}}, "bearer_token_env_var": "MEMPALACE_REMOTE_TOKEN"}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "codex"}, "env_vars": ` + string(serverVars) + `}`,
			},
			Traps: []string{
				"stdio servers get only HOME, PATH and a few more: env_vars passes every variable the edge or MemPalace reads (ladder.ServerVars) by name",
				"an inline bearer_token stops Codex entirely; bearer_token_env_var names the variable",
			},
		},
		{
			Name: "gemini", Title: "Gemini CLI",
			Location: Location{Dir: ".gemini", HomeEnv: "GEMINI_CLI_HOME", Write: []string{"settings.json"}},
			Format:   CommentedJSON, Key: []string{"mcpServers"}, Scope: OptIn, EnvRef: "${%s}", NoBOM: true,
			Redacts: geminiRedacts, HandBack: geminiRef,
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp"}`,
				Remote:   `{"command": "devbox-config", "args": ["bridge"], "env": {"MEMPALACE_ENV_FROM_PARENT": "1"}}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "gemini", "MEMPALACE_ENV_FROM_PARENT": "1"}}`,
			},
			Was: []Entries{{
				Remote: `{"httpUrl": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}}`,
				Edge:   `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "gemini"` + handBack(geminiRedacts, geminiRef) + `}}`,
			}},
			Traps: []string{
				"expands ${NAME} and ${NAME:-} in settings.json when it loads it, and its own saves (`gemini mcp add`, `gemini mcp remove`, …) write the expanded text back: a reference to the token in the entry would put the token's value in the file (0644). So no entry references a secret: the remote rung is `devbox-config bridge`, and bridge and edge read the MEMPALACE_* variables they lack from Gemini's own environment (MEMPALACE_ENV_FROM_PARENT=1); an entry an older render wrote that Gemini saved expanded gets its references back, with a warning, and the file is made owner-only",
				"removes from a stdio server's environment every variable whose name matches TOKEN, KEY, CERT, AUTH, SECRET, … unless the entry sets it, and a variable whose value looks like a secret (a URL with a password, a JWT), and under GitHub Actions nearly all: MEMPALACE_ENV_FROM_PARENT=1 has bridge and edge read those from Gemini's environment (its environment at start: a MEMPALACE_* variable only in Gemini's own .env file does not reach them)",
				"starts no MCP server at all, HTTP or stdio, in a folder it does not trust",
			},
			Ignores: []Ignore{
				{Path: []string{"mcp", "allowed"}, When: Omits, Fold: true,
					Why: "is an allow-list without mempalace: Gemini CLI shows mempalace \"Blocked\" and gives no MemPalace tools",
					Fix: "add \"mempalace\" to mcp.allowed in the file, or remove mcp.allowed"},
				{Path: []string{"mcp", "excluded"}, When: Lists, Fold: true,
					Why: "names mempalace: Gemini CLI shows it \"Blocked\" and gives no MemPalace tools",
					Fix: "take \"mempalace\" out of mcp.excluded in the file"},
			},
		},
		{
			Name: "cursor", Title: "Cursor",
			Location: Location{Dir: ".cursor", Write: []string{"mcp.json"}},
			Format:   JSONC, Key: []string{"mcpServers"}, Scope: OptIn, EnvRef: "${env:%s}",
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp"}`,
				Remote:   `{"url": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "cursor"}}`,
			},
		},
		{
			Name: "vscode", Title: "VS Code",
			Location: Location{XDG: true, Dir: "Code/User", Write: []string{"mcp.json"}},
			Format:   JSONC, Key: []string{"servers"}, Scope: OptIn, EnvRef: "${env:%s}",
			Entries: Entries{
				Solitary: `{"type": "stdio", "command": "mempalace-mcp"}`,
				Remote:   `{"type": "http", "url": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}}`,
				Edge:     `{"type": "stdio", "command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "vscode"}}`,
			},
		},
		{
			Name: "copilot", Title: "GitHub Copilot CLI",
			Location: Location{Dir: ".copilot", DirEnv: "COPILOT_HOME", Write: []string{"mcp-config.json"}},
			Format:   JSONC, Key: []string{"mcpServers"}, Scope: OptIn, EnvRef: "${%s}",
			Entries: Entries{
				Solitary: `{"type": "local", "command": "mempalace-mcp", "args": [], "tools": ["*"]}`,
				Remote:   `{"type": "http", "url": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}, "tools": ["*"]}`,
				Edge:     `{"type": "local", "command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "copilot"}, "tools": ["*"]}`,
			},
			Traps: []string{
				"starts MCP servers only after a GitHub login, so offline only its own reading of the file can be checked (`copilot mcp list --json` shows the header unexpanded; its changelog says headers are resolved from the environment when it connects)",
				"unpacks ~235 MB into $COPILOT_PKG_CACHE_HOME on first run",
			},
		},
		{
			Name: "cline", Title: "Cline CLI",
			Location: Location{Dir: ".cline/data/settings", Write: []string{"cline_mcp_settings.json"}, Marker: ".cline"},
			Format:   JSON, Key: []string{"mcpServers"}, Scope: OptIn,
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp", "args": [], "timeout": 60}`,
				Remote:   `{"command": "devbox-config", "args": ["bridge"], "timeout": 60}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "cline"}, "timeout": 60}`,
			},
			Traps: []string{
				"sends header values verbatim (${VAR}, $VAR, ${env:VAR} arrive literally): the remote rung runs `devbox-config bridge`, which reads the token from the environment",
				"a server that does not answer initialize in 3 s is skipped: the entries set \"timeout\": 60",
				"its hub daemon starts the servers and outlives the CLI, with the environment of the run that started it",
				"strict JSON: a comment makes it load no server",
			},
		},
		{
			Name: "qwen", Title: "Qwen Code",
			Location: Location{Dir: ".qwen", Write: []string{"settings.json"}},
			Format:   CommentedJSON, Key: []string{"mcpServers"}, Scope: OptIn, EnvRef: "${%s}",
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp"}`,
				Remote:   `{"command": "devbox-config", "args": ["bridge"]}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "qwen"}}`,
			},
			Was: []Entries{{Remote: `{"httpUrl": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}}`}},
			Traps: []string{
				"Gemini CLI's fork: the same shape, and it rewrites settings.json itself once (adds \"$version\", keeps comments)",
				"like Gemini it expands ${NAME} when it loads settings.json and its own saves (`qwen mcp add`, `qwen mcp remove`, …) write the expanded text back: the remote rung is `devbox-config bridge`, which reads the token from the environment, so no entry references it; an entry an older render wrote that Qwen saved expanded gets its reference back, with a warning, and the file is made owner-only",
				"unlike Gemini it passes a stdio server its whole environment (only its own QWEN_* secrets removed) and has no ${NAME:-default}: the edge entry names no variable",
			},
		},
		{
			Name: "kilo", Title: "Kilo CLI",
			Location: Location{XDG: true, Dir: "kilo", Files: []string{"config.json", "kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc"}, Write: []string{"kilo.jsonc", "kilo.json"}},
			Format:   JSONC, Key: []string{"mcp"}, Scope: OptIn, EnvRef: "{env:%s}",
			Entries: Entries{
				Solitary: `{"type": "local", "command": ["mempalace-mcp"], "enabled": true}`,
				Remote:   `{"type": "remote", "url": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}", "Connection": "close"}, "oauth": false, "enabled": true}`,
				Edge:     `{"type": "local", "command": ["devbox-config", "edge"], "environment": {"MEMPALACE_EDGE_HARNESS": "kilo"}, "enabled": true}`,
			},
			Schema: "https://app.kilo.ai/config.json",
			Traps: []string{
				"opencode's fork: only {env:VAR} is expanded",
				"runs on opencode's Bun (1.3.14), which pools the socket of a non-2xx answer that said Connection: close: the remote entry sends Connection: close",
				"rewrites its config at start (inserts \"$schema\" and a one-time permission migration, re-indents the entry): render fingerprints only the entry's meaning",
				"also reads opencode.json and opencode.jsonc in its directory, over kilo.jsonc: deep-merges mcp.mempalace across config.json < kilo.json < kilo.jsonc < opencode.json < opencode.jsonc",
			},
		},
		{
			Name: "auggie", Title: "Auggie (Augment CLI)",
			Location: Location{Dir: ".augment", Write: []string{"settings.json"}},
			Format:   JSONC, Key: []string{"mcpServers"}, Scope: OptIn, FixedEnv: true, NoBOM: true,
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp", "args": []}`,
				Remote:   `{"command": "devbox-config", "args": ["bridge"], "env": {"MEMPALACE_ENV_FROM_PARENT": "1"}}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "auggie", "MEMPALACE_ENV_FROM_PARENT": "1"}}`,
			},
			Traps: []string{
				"sends header values verbatim and starts stdio servers with HOME, PATH, SHELL, TERM, USER and LOGNAME only: the remote rung is `devbox-config bridge`, and bridge and edge read the MEMPALACE_* variables they lack from Auggie's own environment (MEMPALACE_ENV_FROM_PARENT=1)",
				"never connects offline: only its reading of the file is checked",
				"reads no server from a file that starts with a UTF-8 byte order mark, and says nothing",
			},
		},
		{
			Name: "continue", Title: "Continue CLI (cn)",
			Location: Location{Dir: ".continue", Write: []string{"config.yaml"}},
			Format:   YAML, Key: []string{"mcpServers"}, ListKey: "name", Scope: OptIn, EnvRef: "${{ secrets.%s }}",
			Skeleton: "name: Local Config\nversion: 1.0.0\nschema: v1\n",
			Entries: Entries{
				Solitary: `{"name": "mempalace", "command": "mempalace-mcp"}`,
				Remote:   `{"name": "mempalace", "type": "streamable-http", "url": {{json .URL}}, "requestOptions": {"headers": {"Authorization": "Bearer {{.Token}}"}}}`,
				Edge:     `{"name": "mempalace", "command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "continue"}}`,
			},
			Traps: []string{
				"a config without name and version is refused whole: a new file starts with them",
				"${{ secrets.VAR }} is read from the environment by the CLI (the IDE extensions read Continue's own secret store)",
			},
		},
		{
			Name: "crush", Title: "Crush",
			Location: Location{XDG: true, Dir: "crush", Write: []string{"crush.json"}},
			Format:   JSON, Key: []string{"mcp"}, Scope: OptIn, EnvRef: "$%s",
			Entries: Entries{
				Solitary: `{"type": "stdio", "command": "mempalace-mcp", "args": []}`,
				Remote:   `{"type": "http", "url": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}}`,
				Edge:     `{"type": "stdio", "command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "crush"}}`,
			},
			Traps: []string{"its npm package downloads the release binary while installing, which fails offline: documented shape only"},
		},
		{
			Name: "goose", Title: "Goose",
			Location: Location{XDG: true, Dir: "goose", Write: []string{"config.yaml"}},
			Format:   YAML, Key: []string{"extensions"}, Scope: OptIn,
			Entries: Entries{
				Solitary: `{"name": "mempalace", "type": "stdio", "cmd": "mempalace-mcp", "args": [], "enabled": true, "timeout": 300}`,
				Remote:   `{"name": "mempalace", "type": "stdio", "cmd": "devbox-config", "args": ["bridge"], "env_keys": ["MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN"], "enabled": true, "timeout": 300}`,
				Edge:     `{"name": "mempalace", "type": "stdio", "cmd": "devbox-config", "args": ["edge"], "envs": {"MEMPALACE_EDGE_HARNESS": "goose"}, "env_keys": ["MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE"], "enabled": true, "timeout": 300}`,
			},
			Traps: []string{"its docs name no environment reference in a remote extension's headers: the remote rung is `devbox-config bridge`, handed the two variables by name (env_keys)"},
		},
		{
			Name: "zed", Title: "Zed",
			Location: Location{XDG: true, Dir: "zed", Write: []string{"settings.json"}},
			Format:   JSONC, Key: []string{"context_servers"}, Scope: OptIn,
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp", "args": [], "env": {}}`,
				Remote:   `{"command": "devbox-config", "args": ["bridge"], "env": {}}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "zed"}}`,
			},
			Traps: []string{"its docs show literal header values only: the remote rung is `devbox-config bridge`", "settings.json is Zed's whole settings file, which Zed edits itself"},
		},
		{
			Name: "windsurf", Title: "Windsurf",
			Location: Location{Dir: ".codeium/windsurf", Write: []string{"mcp_config.json"}},
			Format:   JSON, Key: []string{"mcpServers"}, Scope: OptIn, EnvRef: "${env:%s}",
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp", "args": []}`,
				Remote:   `{"serverUrl": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "windsurf"}}`,
			},
			Traps: []string{"a remote server is serverUrl, not url (a Cursor-style url does not connect)"},
		},
		{
			Name: "roo", Title: "Roo Code",
			Location: Location{XDG: true, Dir: "Code/User/globalStorage/rooveterinaryinc.roo-cline/settings", Write: []string{"mcp_settings.json"}},
			Format:   JSON, Key: []string{"mcpServers"}, Scope: OptIn, EnvRef: "${env:%s}",
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp", "args": []}`,
				Remote:   `{"type": "streamable-http", "url": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "roo"}}`,
			},
			Traps: []string{"a VS Code extension: its global file is in VS Code's globalStorage; a project's .roo/mcp.json wins over it"},
		},
		{
			Name: "amp", Title: "Amp",
			Location: Location{XDG: true, Dir: "amp", Write: []string{"settings.json", "settings.jsonc"}, FirstOnly: true},
			Format:   JSONC, Key: []string{"amp.mcpServers"}, Scope: OptIn, EnvRef: "${%s}", NoBOM: true,
			Entries: Entries{
				Solitary: `{"command": "mempalace-mcp", "args": []}`,
				Remote:   `{"url": {{json .URL}}, "headers": {"Authorization": "Bearer {{.Token}}"}}`,
				Edge:     `{"command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "amp"}}`,
			},
			Traps: []string{"the key is the single dotted name \"amp.mcpServers\", not a path", "reads settings.json alone while it exists, else settings.jsonc: a settings.json beside the user's settings.jsonc hides every setting in it", "looks its account's servers up at ampcode.com on every start"},
		},
	}
}

// handBack is the env members (`, "NAME": "REF"`) with which an edge entry
// hands a harness that removes the names re matches from a stdio server's
// environment (Record.Redacts) back every ServerVars name it matches, each
// as ref of its name. ref expands to "" when the variable is unset: every
// such name the edge and MemPalace 3.11.0 read means the same empty as
// unset (ladder trims; MemPalace tests truthiness or strips), while an
// unexpanded reference would arrive literally as the value.
func handBack(re *regexp.Regexp, ref string) string {
	var b strings.Builder
	for _, n := range ladder.ServerVars() {
		if re.MatchString(n) {
			k, _ := json.Marshal(n)
			v, _ := json.Marshal(fmt.Sprintf(ref, n))
			fmt.Fprintf(&b, ", %s: %s", k, v)
		}
	}
	return b.String()
}

// fromOldGenerator reports whether an opencode entry is exactly what the
// images' previous generator (generate-config.py, RFC 001 §4.1) wrote:
// {"type":"local","command":["mempalace-mcp"]} or
// {"type":"remote","url":…,"headers":{"Authorization":"Bearer {env:MEMPALACE_REMOTE_TOKEN}"}}.
// Such an entry has no record but is not a user's edit (ucf's "matches a
// historical md5" rule).
func fromOldGenerator(entry []byte) bool {
	var v map[string]any
	if entry == nil || json.Unmarshal(entry, &v) != nil {
		return false
	}
	switch v["type"] {
	case "local":
		cmd, ok := v["command"].([]any)
		return len(v) == 2 && ok && len(cmd) == 1 && cmd[0] == ladder.LocalServer
	case "remote":
		url, ok := v["url"].(string)
		hdr, hok := v["headers"].(map[string]any)
		return len(v) == 3 && ok && url != "" && hok && len(hdr) == 1 && hdr["Authorization"] == "Bearer {env:"+ladder.EnvRemoteToken+"}"
	}
	return false
}
