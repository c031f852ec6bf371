package gateway

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// The Inspector CLI (v2, the client library mcp-remote and pi-mcp-adapter
// use too) lists the primary's tools through the gateway with a device
// token. It opens GET /mcp for a server stream after initialize; a 404 on
// a kept-alive connection made it list no tools at all, exit 0.
func TestRealClientInspectorListsToolsThroughTheGateway(t *testing.T) {
	testbed.Integration(t, "drives the pinned npm clients")
	dir := testbed.Dir(t)
	g := newGW(t, devices)
	h := testbed.NewHome(t)
	out, errOut, err := h.Run(t, 90*time.Second, testbed.Node(t), filepath.Join(dir, "node_modules", ".bin", "mcp-inspector"), "--cli",
		g.http.URL+"/mcp", "--transport", "http", "--header", "Authorization: Bearer "+g.tokens["laptop-7f3a"], "--method", "tools/list")
	var got struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if i := strings.Index(out, "{"); err != nil || i < 0 || json.Unmarshal([]byte(out[i:]), &got) != nil {
		t.Fatalf("inspector: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	names := make([]string, 0, len(got.Tools))
	for _, tl := range got.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "mempalace_add_drawer") {
		t.Fatalf("the inspector lists %d tools through the gateway: %v", len(names), names)
	}
}
