package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// An admin device may not run sync or mine on the primary through the
// gateway (RFC 001 §7.2, §6.2 "no remote mine"): both are refused, with
// what to do instead, and neither reaches the upstream.
func TestSyncAndMineRefusedForAdmin(t *testing.T) {
	g := newGW(t, devices)
	admin := g.tokens["admin-0001"]
	for _, c := range []struct {
		tool string
		args map[string]any
		why  string
	}{
		{"sync", map[string]any{"apply": true}, "§7.2"},
		{"sync", map[string]any{}, "§7.2"},
		{"mine", map[string]any{"source": "/workspace/repo"}, "write slot"},
		{"mine", map[string]any{"source": "/workspace/repo", "dry_run": true}, "write slot"},
	} {
		_, rpc, status := g.call(admin, c.tool, c.args)
		msg := fmt.Sprint(rpc["message"])
		if status != 200 || rpc == nil || rpc["code"] != float64(CodeDenied) {
			t.Errorf("%s %v by the admin: HTTP %d, error %v: want a denial", c.tool, c.args, status, rpc)
			continue
		}
		for _, want := range []string{"mempalace_" + c.tool, c.why, "primary's host", "mempalace " + c.tool} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the refusal %q does not say %q", c.tool, msg, want)
			}
		}
	}
	for _, tool := range []string{"sync", "mine"} {
		if n := g.up.toolCalls(t, tool); n != 0 {
			t.Errorf("%s reached the upstream %d times", tool, n)
		}
	}
}
