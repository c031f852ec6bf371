package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tailscale/hujson"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// TestOpencodeLoadsEveryRung renders each rung into an isolated HOME and
// asks the pinned opencode itself: `opencode debug config` shows the entry,
// `opencode mcp list` reports the server, and the file is byte-identical
// afterwards (no "$schema" rewrite). The MemPalace test double stands in
// for mempalace-mcp and for the primary.
func TestOpencodeLoadsEveryRung(t *testing.T) {
	testbed.Integration(t, "drives the real opencode from npm and builds the binaries")
	oc := testbed.Opencode(t)
	h := testbed.NewHome(t)
	h.Link(t, testbed.Build(t, "./cmd/fakepalace", "mempalace-mcp"), "mempalace-mcp")
	h.Link(t, testbed.Build(t, "./cmd/devbox-config", "devbox-config"), "devbox-config")
	h.Setenv("MEMPALACE_PALACE_PATH", filepath.Join(h.Dir, ".mempalace", "palace"))

	const token = "tok-SECRET-opencode-it"
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: token})

	file := filepath.Join(h.Dir, ".config", "opencode", "opencode.jsonc")
	rungs := []struct {
		name   string
		env    map[string]string
		check  func(entry map[string]any) bool
		status string
	}{
		{"solitary", nil, func(e map[string]any) bool { return e["type"] == "local" && e["command"].([]any)[0] == "mempalace-mcp" }, "connected"},
		{"remote", map[string]string{"MEMPALACE_REMOTE_URL": srv.URL(), "MEMPALACE_REMOTE_TOKEN": token},
			func(e map[string]any) bool {
				return e["type"] == "remote" && e["url"] == srv.URL() && e["oauth"] == false
			}, "connected"},
		{"edge", map[string]string{"MEMPALACE_REMOTE_URL": srv.URL(), "MEMPALACE_REMOTE_TOKEN": token, "MEMPALACE_EDGE": "1"},
			func(e map[string]any) bool {
				c := e["command"].([]any)
				return e["type"] == "local" && c[0] == "devbox-config" && c[1] == "edge"
			}, ""},
	}
	for _, r := range rungs {
		t.Run(r.name, func(t *testing.T) {
			for _, k := range []string{"MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE"} {
				h.Setenv(k, r.env[k])
			}
			res, _, err := Run(Options{Home: h.Dir, Env: h.Lookup, LookPath: func(string) (string, error) { return filepath.Join(h.Bin, "mempalace-mcp"), nil }}, false)
			if err != nil || res[0].Kept() {
				t.Fatalf("render: %v %+v", err, res)
			}
			before, _ := os.ReadFile(file)

			out, errOut, err := h.Run(t, 60*time.Second, oc, "debug", "config")
			if err != nil {
				t.Fatalf("opencode debug config: %v\n%s", err, errOut)
			}
			var cfg struct {
				MCP map[string]map[string]any `json:"mcp"`
			}
			if err := json.Unmarshal([]byte(out[bytes.IndexByte([]byte(out), '{'):]), &cfg); err != nil {
				t.Fatalf("debug config output: %v\n%s", err, out)
			}
			if e := cfg.MCP["mempalace"]; e == nil || !r.check(e) {
				t.Fatalf("opencode resolved mcp.mempalace = %v", cfg.MCP["mempalace"])
			}

			status, printed, _ := testbed.OpencodeMCPStatus(t, h, oc, "mempalace")
			if status == "" {
				t.Fatalf("opencode mcp list does not report mempalace:\n%s", printed)
			}
			if r.status != "" && status != r.status {
				t.Fatalf("opencode mcp list: mempalace %s, want %s:\n%s", status, r.status, printed)
			}
			after, _ := os.ReadFile(file)
			if !bytes.Equal(before, after) {
				t.Fatalf("opencode rewrote the rendered file:\n%s", after)
			}
			testbed.NoFileContains(t, h.Dir, token)
		})
	}
}

// TestOpencodeRemoteEntryConnectsEveryTime: opencode is a Bun program, and
// the Bun in the pinned opencode (1.3.14) pools a keep-alive socket after
// a response that said "Connection: close" when its status was not 2xx.
// `mempalace serve` (and the double) close the connection after every
// answer, and answer the SDK's GET /mcp, which it sends right after
// notifications/initialized, with 404: that socket goes to the pool half
// closed, the tools/list sent next takes it and fails (ECONNRESET, "The
// socket connection was closed unexpectedly"), and opencode, which drops
// that error, starts the session without the palace's tools (the
// journey's remote step, a few CI runs in ten). The entry render writes
// must make every connect list the tools: its headers, as opencode passes
// them to the SDK's transport, under opencode's own runtime, 500 connects
// to the double without one failure. Kilo CLI, opencode's fork, runs on
// the same Bun (1.3.14 in the pinned 7.7.7) and is checked the same way.
func TestOpencodeRemoteEntryConnectsEveryTime(t *testing.T) {
	testbed.Integration(t, "drives the real opencode's and Kilo's runtime and the SDK from npm")
	for _, c := range []struct {
		name, dir, file string
		bin             func(testing.TB) string
	}{
		{"opencode", "opencode", "opencode.jsonc", testbed.Opencode},
		{"kilo", "kilo", "kilo.jsonc", testbed.Kilo},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := c.bin(t)
			h := testbed.NewHome(t)
			if err := os.MkdirAll(filepath.Join(h.Dir, ".config", c.dir), 0o755); err != nil { // Kilo is opt-in: set up here
				t.Fatal(err)
			}
			remoteConnects(t, h, bin, filepath.Join(h.Dir, ".config", c.dir, c.file))
		})
	}
}

// remoteConnects renders remote mode in h, then connects 500 times to the
// double with the headers of file's entry under bin's Bun.
func remoteConnects(t *testing.T, h *testbed.Home, bin, file string) {
	const token = "tok-SECRET-opencode-connects"
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: token})
	h.Setenv("MEMPALACE_REMOTE_URL", srv.URL())
	h.Setenv("MEMPALACE_REMOTE_TOKEN", token)
	if _, _, err := Run(Options{Home: h.Dir, Env: h.Lookup, LookPath: found}, false); err != nil {
		t.Fatalf("render: %v", err)
	}
	std, err := hujson.Standardize(mustRead(t, file))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCP map[string]struct {
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal(std, &cfg); err != nil {
		t.Fatal(err)
	}
	entry := cfg.MCP["mempalace"]
	if entry.URL == "" {
		t.Fatalf("render wrote no remote entry in %s:\n%s", file, std)
	}
	sent := map[string]string{}
	for k, v := range entry.Headers { // opencode and Kilo expand {env:VAR} and nothing else
		sent[k] = envRef.ReplaceAllStringFunc(v, func(ref string) string { return h.Getenv(envRef.FindStringSubmatch(ref)[1]) })
	}
	hdr, _ := json.Marshal(sent)
	h.Setenv("BUN_BE_BUN", "1") // the binary runs a script as Bun
	h.Setenv("HEADERS", string(hdr))
	out, errOut, err := h.Run(t, 120*time.Second, bin, testbed.Script(t, "remote-connects.mjs"), entry.URL, "500")
	var res struct {
		Runtime  string
		Connects int
		Failures []map[string]any
	}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Connects != 500 {
		t.Fatalf("remote-connects.mjs: %v\n%s\n%s", err, out, errOut)
	}
	if len(res.Failures) > 0 {
		t.Fatalf("%s: %d of %d connects with the rendered entry's headers %s failed, e.g. %v", res.Runtime, len(res.Failures), res.Connects, entry.Headers, res.Failures[0])
	}
}

var envRef = regexp.MustCompile(`\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)

// Issue 15's round trip, checked by the pinned opencode itself: for
// comment-heavy configs (a block comment across the head, one that is all
// "mcp" holds, a comment before a neighbour on one line, a byte order mark,
// a final // comment without newline) every rendition of solitary, remote,
// edge and solitary again parses in opencode with the entry present, and
// from the first rendition on no byte outside the entry changes.
func TestOpencodeParsesCommentHeavyRenditions(t *testing.T) {
	testbed.Integration(t, "drives the real opencode from npm and builds the binaries")
	oc := testbed.Opencode(t)
	inputs := map[string]string{
		"block comment across the head": "{ /* my settings,\n     synced */\n  \"theme\": \"nord\"\n}\n",
		"block comment all mcp holds":   "{\n  \"mcp\": { /* servers\n  go here */ }\n}\n",
		"comment before a neighbour":    "{\"mcp\": { /* keep me */ \"other\": {\"type\": \"local\", \"command\": [\"true\"], \"enabled\": false} }}",
		"byte order mark":               "\ufeff{\n  // bom\n  \"theme\": \"nord\"\n}\n",
		"final comment without newline": "{\n  \"theme\": \"nord\"\n}\n// the end",
	}
	rungs := []struct {
		name string
		env  map[string]string
		typ  string
	}{
		{"solitary", nil, "local"},
		{"remote", map[string]string{"MEMPALACE_REMOTE_URL": "https://palace.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}, "remote"},
		{"edge", map[string]string{"MEMPALACE_REMOTE_URL": "https://palace.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t", "MEMPALACE_EDGE": "1"}, "local"},
		{"solitary", nil, "local"},
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			h := testbed.NewHome(t)
			dir := filepath.Join(h.Dir, ".config", "opencode")
			os.MkdirAll(dir, 0o755)
			file := filepath.Join(dir, "opencode.jsonc")
			os.WriteFile(file, []byte(in), 0o644)
			var first []byte // the first rendition, as opencode left it
			for i, r := range rungs {
				// opencode itself writes "$schema" into a file without one
				// (dropping a byte order mark) when it starts: what render
				// keeps is the file as it finds it, opencode's edits too.
				before, _ := os.ReadFile(file)
				res, _, err := Run(Options{Home: h.Dir, HomeFromFlag: true, Env: envOf(r.env), LookPath: found}, false)
				if err != nil || res[0].Kept() {
					t.Fatalf("%s: render %v %+v", r.name, err, res[0])
				}
				data, _ := os.ReadFile(file)
				if i > 0 && !sameOutsideEntry(before, data) {
					t.Fatalf("%s: bytes outside the entry changed:\n%q\n%q", r.name, before, data)
				}
				out, errOut, err := h.Run(t, 60*time.Second, oc, "debug", "config")
				if err != nil {
					t.Fatalf("%s: opencode debug config: %v\n%s\n%s", r.name, err, errOut, data)
				}
				var cfg struct {
					MCP map[string]map[string]any `json:"mcp"`
				}
				if i := strings.IndexByte(out, '{'); i < 0 || json.Unmarshal([]byte(out[i:]), &cfg) != nil {
					t.Fatalf("%s: debug config output:\n%s", r.name, out)
				}
				if e := cfg.MCP["mempalace"]; e == nil || e["type"] != r.typ {
					t.Fatalf("%s: opencode sees mcp.mempalace = %v in\n%s", r.name, cfg.MCP["mempalace"], data)
				}
				if i == 0 {
					first = mustRead(t, file)
				}
			}
			if !bytes.Equal(first, mustRead(t, file)) {
				t.Fatal("back to solitary did not give back the first rendition's bytes")
			}
		})
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameOutsideEntry reports whether a and b differ only inside their
// mcp.mempalace values.
func sameOutsideEntry(a, b []byte) bool {
	span := func(src []byte) (int, int, bool) {
		body := bytes.TrimPrefix(src, []byte("\ufeff"))
		v, err := hujson.Parse(append(bytes.Clone(body), '\n')) // a final // comment needs one
		if err != nil {
			return 0, 0, false
		}
		e := v.Find("/mcp/mempalace")
		if e == nil {
			return 0, 0, false
		}
		off := len(src) - len(body)
		return e.StartOffset + off, e.EndOffset + off, true
	}
	sa, ea, ok1 := span(a)
	sb, eb, ok2 := span(b)
	return ok1 && ok2 && bytes.Equal(a[:sa], b[:sb]) && bytes.Equal(a[ea:], b[eb:])
}
