package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// Goose reads its config.yaml with serde_yaml (block/goose,
// crates/goose/src/config/base) and, when that fails, writes its next
// setting over an empty mapping: the user's config is gone. Goose has no
// npm package, so realclients/goose-yaml (serde_yaml at the version
// Goose's Cargo.lock pins) reads what render wrote, as Goose would.

// gooseView is goose-yaml's answer: whether serde_yaml parsed the file as a
// mapping, and each extensions entry as Goose would deserialize it.
type gooseView struct {
	Parsed     bool
	Stage      string
	Error      string
	Extensions []gooseExt
	ExtError   string `json:"extensions_error"`
}

type gooseExt struct {
	Key     string
	Type    string
	Skipped string // why Goose would skip the entry, "" when it takes it
	Enabled *bool
	Name    string
	Cmd     string
	Args    []string
	Envs    map[string]string
	EnvKeys []string `json:"env_keys"`
	Timeout *uint64
	Raw     any // the entry as serde_yaml read it
}

// gooseRead runs goose-yaml on path: exit 0 parsed, 1 refused (with
// serde_yaml's message), anything else is a broken test rig.
func gooseRead(t *testing.T, bin, path string) gooseView {
	t.Helper()
	out, err := exec.Command(bin, path).Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("goose-yaml %s: %v %s", path, err, out)
	}
	var v gooseView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("goose-yaml %s: %v\n%s", path, err, out)
	}
	return v
}

// mempalace is the one entry under the key mempalace that Goose takes;
// it fails the test when there is none, or more than one.
func (v gooseView) mempalace(t *testing.T) gooseExt {
	t.Helper()
	var found []gooseExt
	for _, e := range v.Extensions {
		if e.Key == "mempalace" {
			found = append(found, e)
		}
	}
	if !v.Parsed || len(found) != 1 || found[0].Skipped != "" {
		t.Fatalf("Goose does not read exactly one mempalace extension: %+v", v)
	}
	return found[0]
}

func (v gooseView) others() []gooseExt {
	out := []gooseExt{}
	for _, e := range v.Extensions {
		if e.Key != "mempalace" {
			out = append(out, e)
		}
	}
	return out
}

// gooseConfig is a hand-kept Goose config: comments, an anchor and an alias
// on another extension, a builtin, a platform and two stdio extensions.
const gooseConfig = `# my Goose config (edited by hand)
GOOSE_PROVIDER: anthropic
GOOSE_MODEL: claude-sonnet-4-5   # the default model
GOOSE_MODE: smart_approve
extensions:
  developer:
    bundled: true
    display_name: Developer
    enabled: true
    name: developer
    timeout: 300
    type: builtin
  # GitHub, token by name
  github:
    args: &npx [-y, "@modelcontextprotocol/server-github"]
    cmd: npx
    description: null
    enabled: false
    env_keys: [GITHUB_PERSONAL_ACCESS_TOKEN]
    envs: {}
    name: github
    timeout: 300
    type: stdio
  memory:
    args: *npx
    cmd: npx
    enabled: true
    envs:
      MEMORY_FILE_PATH: /home/me/.goose/memory.json
    name: memory
    timeout: 300
    type: stdio
  todo:
    available_tools: []
    bundled: true
    description: Enable a todo list for goose
    enabled: true
    name: todo
    type: platform
GOOSE_TELEMETRY_ENABLED: false
`

func TestGooseReadsEveryRung(t *testing.T) {
	testbed.Integration(t, "runs goose-yaml, Goose's YAML library, built by scripts/install-realclients")
	bin := testbed.GooseYAML(t)
	want := map[string]struct {
		cmd, args string
		envKeys   []string
	}{
		"solitary": {"mempalace-mcp", "[]", nil},
		"remote":   {"devbox-config", "[bridge]", []string{"MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN"}},
		"edge":     {"devbox-config", "[edge]", []string{"MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE"}},
	}
	for _, start := range []struct{ name, file string }{{"no file", ""}, {"hand-kept config", gooseConfig}} {
		for _, rung := range []string{"solitary", "remote", "edge"} {
			t.Run(start.name+"/"+rung, func(t *testing.T) {
				home := t.TempDir()
				path := filepath.Join(home, ".config/goose/config.yaml")
				var before gooseView
				if start.file != "" {
					os.MkdirAll(filepath.Dir(path), 0o755)
					os.WriteFile(path, []byte(start.file), 0o644)
					if before = gooseRead(t, bin, path); !before.Parsed || len(before.Extensions) != 4 {
						t.Fatalf("the starting config does not read as four extensions: %+v", before)
					}
				}
				env := map[string]string{}
				if rung != "solitary" {
					env["MEMPALACE_REMOTE_URL"], env["MEMPALACE_REMOTE_TOKEN"] = "https://palace.example.org/mcp", "tok-SECRET-goose"
				}
				if rung == "edge" {
					env["MEMPALACE_EDGE"] = "1"
				}
				o := opts(home, env)
				o.Targets = []string{"goose"}
				if res, _, err := Run(o, false); err != nil || len(res) != 1 || res[0].Kept() {
					t.Fatalf("render: %v %+v", err, res)
				}
				after := gooseRead(t, bin, path)
				e := after.mempalace(t)
				w := want[rung]
				if e.Type != "stdio" || e.Name != "mempalace" || e.Cmd != w.cmd || jsonText(e.Args) != w.args ||
					!slices.Equal(e.EnvKeys, w.envKeys) || e.Enabled == nil || !*e.Enabled || e.Timeout == nil || *e.Timeout != 300 {
					t.Errorf("Goose reads the entry as %+v; want stdio %s %s, env_keys %v, enabled, timeout 300", e, w.cmd, w.args, w.envKeys)
				}
				if rung == "edge" && e.Envs["MEMPALACE_EDGE_HARNESS"] != "goose" {
					t.Errorf("edge envs: %v", e.Envs)
				}
				if !reflect.DeepEqual(after.others(), before.others()) {
					t.Errorf("the other extensions changed as Goose reads them:\nbefore %+v\nafter  %+v", before.others(), after.others())
				}
				if data, _ := os.ReadFile(path); bytes.Contains(data, []byte("tok-SECRET-goose")) {
					t.Errorf("the token is in the file:\n%s", data)
				}
			})
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(bytes.ReplaceAll(b, []byte(`"`), nil))
}
