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
	"strconv"
	"strings"
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
	n, e := gooseEntries(v)
	if !v.Parsed || n != 1 || e.Skipped != "" {
		t.Fatalf("Goose does not read exactly one mempalace extension: %+v", v)
	}
	return e
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

// gooseTricky are inputs where two YAML libraries may part: render's Go
// library and Goose's serde_yaml (libyaml, YAML 1.1 scalars).
var gooseTricky = []string{
	"",
	"# only a comment\n",
	"extensions: {}\n",
	"extensions:\n",
	"extensions: []\n",
	"a: 1\na: 2\n",
	"extensions:\n  dev:\n    cmd: x\n    cmd: y\n",
	"010: a\n10: b\n",
	"010: a\n8: b\n",
	"1.0: a\n1: b\n",
	"0x10: a\n16: b\n",
	"yes: a\ntrue: b\n",
	"on: a\n'on': b\n",
	"~: a\nnull: b\n",
	".nan: a\n.nan: b\n",
	"extensions:\n  dev:\n\tcmd: x\n",
	"a:\tb\nextensions: {}\n",
	"x: \xff\n",
	"\xef\xbb\xbfextensions:\n  dev:\n    cmd: x\n",
	"\xef\xbb\xbf",
	"extensions:\r\n  dev:\r\n    cmd: x\r\n",
	"a: 1\r\n",
	"? extensions\n: dev:\n    cmd: x\n",
	"extensions:\n  ? dev\n  : enabled: true\n    cmd: x\n",
	"? [a, b]\n: c\n",
	"{extensions: {}}\n",
	"extensions: {dev: {cmd: x}}\n",
	"---\nextensions: {}\n",
	"--- # the config\nextensions:\n  dev:\n    cmd: x\n...\n",
	"extensions:\n  dev:\n    cmd: x\n...\n",
	"a: 1\n---\nb: 2\n",
	"---\n---\n",
	"%YAML 1.2\n---\nextensions: {}\n",
	"%YAML 1.1\n---\nextensions: {}\n",
	"# c\r\n%YAML 1.1\r\n%TAG !e! tag:example.com,2000:\r\n--- # the config\r\nextensions:\r\n  memory:\r\n    cmd: npx\r\n",
	"base: &b\n  enabled: true\nextensions:\n  dev: *b\n",
	"base: &b\n  enabled: true\nextensions:\n  dev:\n    <<: *b\n    cmd: x\n",
	"base: &b {dev: {cmd: x}}\nextensions:\n  <<: *b\n",
	"extensions: &e\n  dev:\n    cmd: x\nother: *e\n",
	"extensions: !!map\n  dev:\n    cmd: x\n",
	"extensions:\n  !!str dev:\n    cmd: x\n",
	"extensions:\n  'mempalace':\n    cmd: old\n",
	"extensions:\n  \"mem\\x70alace\":\n    cmd: old\n",
	"extensions:\n  mempalace:\n    cmd: old\n  mempalace:\n    cmd: older\n",
	"extensions:\n    indented4:\n        cmd: x\n",
	"extensions:\n  dev:\n    cmd: x",
	"extensions:\n  dev:\n    cmd: |\n      multi\n      line\n",
	"extensions:\n  dev:\n    cmd: x # comment\n# end\n",
	"- a\n",
	"just a string\n",
	"extensions: 3\n",
	"? \n: x\n",
	"\"\": x\n",
	"a: !!binary aGVsbG8=\n",
	"a: 2001-12-14\nb: 2001-12-14\n",
	"a: \"\\u0000\"\n",
	"a: \x00\n",
	"a: \u0085b\n",
	"a: 1\u2028b: 2\n",
	"a: b\u00a0\n",
	"extensions:\n  dev:\n    cmd: x\n  \"\": {}\n",
	"0b101: a\n5: b\n",
	"0o10: a\n8: b\n",
	"1e2: a\n100: b\n",
	"1e2: a\n100.0: b\n",
	"+1: a\n1: b\n",
	"+0x1: a\n1: b\n",
	".inf: a\n.Inf: b\n",
	"-0.0: a\n0.0: b\n",
	"True: a\ntrue: b\n",
	"'1': a\n\"1\": b\n",
	"!!str 1: a\n\"1\": b\n",
	"!!float 1: a\n1.0: b\n",
	"? [a, b]\n: 1\n? [a, b]\n: 2\n",
	"x: &x y\n? *x\n: 1\ny: 2\n",
	"extensions:\n  dev: &d\n    cmd: x\n  *d : 1\n",
	"a: 18446744073709551616\n",
	"a: -9223372036854775809\n",
	"a: 1e400\n",
	"a: !!int x\n",
	"a: !!bool yes\n",
	"a: !foo bar\n",
	"a: !!set {x}\n",
	"a: &x [*x]\n",
	"a: " + strings.Repeat("[", 130) + strings.Repeat("]", 130) + "\n",
}

// gooseRefusedButWritten are the inputs serde_yaml refuses that render
// writes into (docs/harnesses.md, Goose's YAML): keys it deems equal and
// render's YAML 1.2 comparison does not, and values it cannot hold. Goose
// already discards such a file; render's entry goes with it.
var gooseRefusedButWritten = map[string]bool{
	".nan: a\n.nan: b\n":         true,
	"0b101: a\n5: b\n":           true,
	"+0x1: a\n1: b\n":            true,
	"!!float 1: a\n1.0: b\n":     true,
	"x: &x y\n? *x\n: 1\ny: 2\n": true,
	"a: 18446744073709551616\n":  true,
	"a: -9223372036854775809\n":  true,
	"a: !!int x\n":               true,
	"a: !!bool yes\n":            true,
	"a: &x [*x]\n":               true,
	"a: " + strings.Repeat("[", 130) + strings.Repeat("]", 130) + "\n": true,
}

// A differential of render's YAML handling and Goose's: every file Goose
// reads that render writes into must read back, in serde_yaml, as one
// mempalace extension Goose takes; a file serde_yaml refuses must not be
// written into, but for the recorded gooseRefusedButWritten. Where render
// refuses a file Goose reads (render is stricter), -v logs it.
func TestGooseYAMLDifferential(t *testing.T) {
	testbed.Integration(t, "runs goose-yaml, Goose's YAML library, built by scripts/install-realclients")
	bin := testbed.GooseYAML(t)
	for _, in := range append(gooseTricky, fuzzCorpus(t, "../merge/testdata/fuzz/FuzzYAMLRoundTrip")...) {
		home := t.TempDir()
		path := filepath.Join(home, ".config/goose/config.yaml")
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(in), 0o644)
		before := gooseRead(t, bin, path)
		o := opts(home, map[string]string{})
		o.Targets = []string{"goose"}
		res, _, err := Run(o, false)
		if err != nil || len(res) != 1 {
			t.Fatalf("%q: %v %+v", in, err, res)
		}
		out, _ := os.ReadFile(path)
		wrote := !bytes.Equal(out, []byte(in))
		after := gooseRead(t, bin, path)
		switch {
		case wrote && before.Parsed:
			if n, e := gooseEntries(after); n != 1 || e.Skipped != "" || e.Cmd != "mempalace-mcp" {
				t.Errorf("%q: render wrote %q, which Goose reads as %+v", in, out, after)
			}
		case wrote && !gooseRefusedButWritten[in]:
			t.Errorf("%q: render wrote into a file Goose refuses (%s):\n%q", in, before.Error, out)
		case !wrote && before.Parsed && res[0].Action == ActionSkipped:
			t.Logf("%q: Goose reads it, render refuses it: %q", in, res[0].Warnings)
		}
		if gooseRefusedButWritten[in] && (before.Parsed || !wrote) {
			t.Errorf("%q is no longer written into while Goose refuses it (parsed %v, wrote %v): take it off gooseRefusedButWritten and docs/harnesses.md", in, before.Parsed, wrote)
		}
	}
}

// gooseEntries counts the extensions under the key mempalace, returning
// the last.
func gooseEntries(v gooseView) (n int, last gooseExt) {
	for _, e := range v.Extensions {
		if e.Key == "mempalace" {
			n, last = n+1, e
		}
	}
	return n, last
}

// fuzzCorpus reads the []byte inputs of a go test fuzz corpus directory.
func fuzzCorpus(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if q, ok := strings.CutPrefix(line, "[]byte("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				out = append(out, s)
			}
		}
	}
	return out
}
