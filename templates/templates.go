// Package templates holds the embedded harness entries devbox-config writes
// for each rung of the ladder, and the default pi settings template.
//
// An entry never contains a secret: the bearer token is referenced by name
// ({env:MEMPALACE_REMOTE_TOKEN} for opencode, bearerTokenEnv for pi's MCP
// adapter), so rotating it needs no rewrite and no file ever holds it.
package templates

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"text/template"

	"github.com/joakimp/devbox-config/ladder"
)

//go:embed files
var files embed.FS

// Harness names an entry family.
type Harness string

const (
	Opencode Harness = "opencode"
	PiMCP    Harness = "pi-mcp"
)

// Entry returns the standard JSON of the managed entry for a harness in the
// given settings, or nil when nothing must be registered (R5).
func Entry(h Harness, s ladder.Settings) ([]byte, error) {
	if !s.Register() {
		return nil, nil
	}
	name := fmt.Sprintf("files/%s-%s.json.tmpl", h, s.Mode)
	src, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("no template for %s in %s mode: %w", h, s.Mode, err)
	}
	t, err := template.New(name).Funcs(template.FuncMap{"json": jsonString}).Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, s); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	out := bytes.TrimSpace(buf.Bytes())
	if !json.Valid(out) {
		return nil, fmt.Errorf("template %s produced invalid JSON", name)
	}
	return out, nil
}

// PiSettings returns the embedded default pi settings template.
func PiSettings() []byte {
	b, err := files.ReadFile("files/pi-settings.json")
	if err != nil {
		panic(err) // embedded at build time
	}
	return b
}

func jsonString(s string) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(buf.Bytes())), nil
}

// FromOldGenerator reports whether an opencode entry is exactly what the
// images' previous generator (generate-config.py, RFC 001 §4.1) wrote:
// {"type":"local","command":["mempalace-mcp"]} or
// {"type":"remote","url":…,"headers":{"Authorization":"Bearer {env:MEMPALACE_REMOTE_TOKEN}"}}.
// Such an entry has no record but is not a user's edit, so the environment
// may replace it (ucf's "matches a historical md5" rule).
func FromOldGenerator(h Harness, entry []byte) bool {
	if h != Opencode || entry == nil {
		return false
	}
	var v map[string]any
	if json.Unmarshal(entry, &v) != nil {
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
