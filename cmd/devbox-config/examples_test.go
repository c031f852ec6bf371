package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// envLineRE is a variable's line in a .env template, commented out or not.
var envLineRE = regexp.MustCompile(`(?m)^#? ?([A-Z][A-Z0-9_]*)=`)

// Every variable the .env templates name (operator.md's device .env and
// examples/.env.example) reaches the container examples/docker-compose.yml
// starts. It passed seven: operator.md's MEMPALACE_EMBEDDING_MODEL did not
// reach MemPalace, which ran another embedder on a palace filled with the
// fleet's and refused every write, while `doctor --env-file .env` read the
// file and found nothing to fix (attack20 f08).
func TestComposeExamplePassesTheEnvTemplates(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	op := read("docs/operator.md")
	_, block, ok := strings.Cut(op, "The device's `.env`")
	_, block, ok2 := strings.Cut(block, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("operator.md has no device .env template (\"The device's `.env`\" and a sh block)")
	}
	var names []string
	for _, text := range []string{block, read("examples/.env.example")} {
		for _, m := range envLineRE.FindAllStringSubmatch(text, -1) {
			names = append(names, m[1])
		}
	}
	if len(names) < 8 {
		t.Fatalf("only %d variables in the templates: %q", len(names), names)
	}

	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			EnvFile     []struct {
				Path string `yaml:"path"`
			} `yaml:"env_file"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read("examples/docker-compose.yml")), &compose); err != nil {
		t.Fatal(err)
	}
	devbox, ok := compose.Services["devbox"]
	if !ok {
		t.Fatal("examples/docker-compose.yml has no devbox service")
	}
	whole := false
	for _, f := range devbox.EnvFile {
		whole = whole || f.Path == ".env"
	}
	for _, n := range names {
		if _, listed := devbox.Environment[n]; !listed && !whole {
			t.Errorf("%s (in a .env template) does not reach the devbox container", n)
		}
	}
}

// examples/.env.example, which devbox.md sends devbox users to, has the
// fleet's model line with a value MemPalace 3.11 knows (its
// _KNOWN_EMBEDDING_MODELS), as doctor --env-file needs it, and tells a
// device behind a gateway to use the identity its operator gave `device add`
// rather than one it makes up (outsider65 F9).
func TestEnvExampleHasTheModelAndTheGatewaysIdentity(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	m := regexp.MustCompile(`(?m)^#? ?MEMPALACE_EMBEDDING_MODEL=(\S*)$`).FindStringSubmatch(text)
	known := map[string]bool{"minilm": true, "embeddinggemma": true, "embeddinggemma2": true, "openai-compat": true}
	if m == nil || !known[m[1]] {
		t.Errorf("examples/.env.example has no MEMPALACE_EMBEDDING_MODEL line with a model MemPalace knows: %q", m)
	}
	if !strings.Contains(strings.Join(strings.Fields(strings.ReplaceAll(text, "#", "")), " "), "what your operator gave `device add`") {
		t.Error("examples/.env.example does not say that behind a gateway the identity is the one `device add` was given")
	}
}
