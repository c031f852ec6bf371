package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// TestOpencodeLoadsEveryRung renders each rung into an isolated HOME and
// asks the pinned opencode itself: `opencode debug config` shows the entry,
// `opencode mcp list` reports the server, and the file is byte-identical
// afterwards (no "$schema" rewrite). The MemPalace test double stands in
// for mempalace-mcp and for the primary.
func TestOpencodeLoadsEveryRung(t *testing.T) {
	oc := testbed.Opencode(t)
	h := testbed.NewHome(t)
	h.Link(t, testbed.Build(t, "./cmd/fakepalace", "mempalace-mcp"), "mempalace-mcp")
	h.Link(t, testbed.Build(t, "./cmd/devbox-config", "devbox-config"), "devbox-config")
	h.Setenv("MEMPALACE_PALACE_PATH", filepath.Join(h.Dir, ".mempalace", "palace"))

	const token = "tok-SECRET-opencode-it"
	primary, err := fakepalace.New(fakepalace.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := primary.NewHTTP(fakepalace.HTTPOptions{Token: token})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

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

			out, errOut, _ = h.Run(t, 90*time.Second, oc, "mcp", "list")
			status, listed := testbed.MCPList(out + errOut)["mempalace"]
			if !listed {
				t.Fatalf("opencode mcp list does not report mempalace:\n%s%s", out, errOut)
			}
			if r.status != "" && status != r.status {
				t.Fatalf("opencode mcp list: mempalace %s, want %s:\n%s%s", status, r.status, out, errOut)
			}
			after, _ := os.ReadFile(file)
			if !bytes.Equal(before, after) {
				t.Fatalf("opencode rewrote the rendered file:\n%s", after)
			}
			testbed.NoFileContains(t, h.Dir, token)
		})
	}
}
