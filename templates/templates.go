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
