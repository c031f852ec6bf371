package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// An admin device may not run sync or mine on the primary through the
// gateway (RFC 001 §7.2, §6.2 "no remote mine"): both are refused, with
// what to do instead, and neither reaches the upstream.
func TestSyncAndMineRefusedForAdmin(t *testing.T) {
	t.Parallel()
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

// The gateway tells each device what it is (deviceinfo): in the
// initialize result and on every authenticated answer, a refusal's too,
// as the device's own scopes; the edge and doctor read it back.
func TestGatewayTellsTheDeviceItsScopes(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	post := func(token, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", g.http.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := post(g.tokens["admin-0001"], `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	var init struct{ Result json.RawMessage }
	json.Unmarshal(b, &init)
	in, ok := deviceinfo.FromInitialize(init.Result)
	if !ok || in.ID != "admin-0001" || in.Label != "ops" || !in.Admin || in.BulkDelete || in.DeleteCap != 10 || !in.Trash || in.TrashRetentionDays != 30 || !in.Refused("sync") || !in.Refused("mine") || in.KG != "write" ||
		in.Origins != 1 || in.Trusts != nil || in.Untrusted != "mark" || in.InstructionWing != "" {
		t.Fatalf("initialize's advertisement: %+v %v\n%s", in, ok, b)
	}
	if h, ok := deviceinfo.FromHeader(resp.Header); !ok || !reflect.DeepEqual(h, in) {
		t.Fatalf("the header says otherwise: %+v", h)
	}
	// A narrow device, refused: its own scopes, not admin; its trusted set
	// with itself in it.
	g.configure(t, func(c *Config) {
		c.InstructionWing = "wing_instructions"
		l := c.Device("laptop-7f3a")
		l.Trusts, l.Untrusted = []string{"admin-0001"}, UntrustedWithhold
	})
	resp, _ = post(g.tokens["laptop-7f3a"], `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"x"}}}`)
	if h, ok := deviceinfo.FromHeader(resp.Header); !ok || h.Admin || h.ID != "laptop-7f3a" || strings.Join(h.Write, ",") != "shared,wing_opencode" || h.KG != "read" ||
		strings.Join(h.Trusts, ",") != "laptop-7f3a,admin-0001" || h.Untrusted != "withhold" || h.InstructionWing != "wing_instructions" {
		t.Fatalf("a refusal's header: %+v %v", h, ok)
	}
	// Without a valid token: nothing about any device.
	if resp, _ = post("dbx_nope_nope", `{"jsonrpc":"2.0","id":3,"method":"ping"}`); resp.Header.Get(deviceinfo.Header) != "" {
		t.Fatalf("an unauthenticated answer carries %q", resp.Header.Get(deviceinfo.Header))
	}
}
