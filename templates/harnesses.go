package templates

// The harnesses render learned after opencode and pi. Each entry uses its
// harness's own environment reference, so the token is never in a file:
// Claude Code and Gemini CLI expand ${VAR} in headers, Cursor and VS Code
// ${env:VAR}, and Codex names the variable (bearer_token_env_var).
//
// Edge entries pass what the edge needs through the harness's filter of the
// server's environment: Codex starts stdio servers with only HOME, PATH and
// a few more (env_vars lists the rest by name), and Gemini CLI removes
// variables whose names contain TOKEN (the entry hands the token back as
// $MEMPALACE_REMOTE_TOKEN, expanded by Gemini when it starts the server).
const (
	ClaudeCode Harness = "claude-code"
	Codex      Harness = "codex"
	Gemini     Harness = "gemini"
	Cursor     Harness = "cursor"
	VSCode     Harness = "vscode"
)
