// Package templates turns a harness record's entry template into the JSON
// of the managed entry for a rung of the ladder, and holds the default pi
// settings template.
//
// An entry never contains a secret: the bearer token is referenced by name
// (the harness's own syntax, Record.EnvRef, or a field naming the variable),
// so rotating it needs no rewrite and no file ever holds it.
package templates

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"text/template"

	"github.com/joakimp/devbox-config/ladder"
)

//go:embed files
var files embed.FS

// data is what an entry template sees.
type data struct {
	ladder.Settings
	tokenRef string
}

// Token is the harness's reference to MEMPALACE_REMOTE_TOKEN; a template
// that needs one for a harness that has none fails.
func (d data) Token() (string, error) {
	if d.tokenRef == "" {
		return "", errors.New("this harness cannot reference " + ladder.EnvRemoteToken + " from the environment")
	}
	return d.tokenRef, nil
}

// Entry returns the standard JSON of the managed entry that the template
// src (named name in errors) gives in the settings s. Whether it is added
// where there is none is render's decision (ladder.Settings.Register).
// tokenRef is the harness's reference to the token's variable ("" if it
// has none).
func Entry(name, src string, s ladder.Settings, tokenRef string) ([]byte, error) {
	if src == "" {
		return nil, fmt.Errorf("no template for %s in %s mode", name, s.Mode)
	}
	t, err := template.New(name).Funcs(template.FuncMap{"json": jsonString}).Parse(src)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data{Settings: s, tokenRef: tokenRef}); err != nil {
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
