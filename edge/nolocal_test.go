package edge

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callWithin calls a tool and fails if the answer takes longer than the
// edge's call timeout plus a margin for a loaded machine.
func callWithin(t *testing.T, h *harness, limit time.Duration, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*limit)
	defer cancel()
	res, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if took := time.Since(start); took > limit {
		t.Errorf("%s answered after %v, past the edge's timeout", tool, took.Round(time.Millisecond))
	}
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var m map[string]any
	if len(res.Content) > 0 {
		json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &m)
	}
	return res, m
}

func toolNames(t *testing.T, h *harness) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// With no local palace server (mempalace-mcp missing) the tools never
// vanish and every call is answered within MEMPALACE_EDGE_TIMEOUT: on a
// fresh palace with the primary down (the catalogue's tools), and with the
// primary up (its tools; reads from it, writes queued for it).
func TestToolsNeverVanishWithoutALocalServer(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	limit := timeout + 1500*time.Millisecond
	missing := []string{filepath.Join(t.TempDir(), "mempalace-mcp-not-installed")}

	t.Run("fresh palace, primary down", func(t *testing.T) {
		h := start(t, harnessOpts{child: missing, primaryDown: true, timeout: timeout})
		begin := time.Now()
		names := toolNames(t, h)
		if took := time.Since(begin); took > limit {
			t.Errorf("tools/list took %v", took)
		}
		if len(names) < 40 || !strings.Contains(strings.Join(names, " "), "mempalace_search") {
			t.Fatalf("tools listed: %v", names)
		}
		for _, c := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"mempalace_search", map[string]any{"query": "q"}, "local palace unavailable"},
			{"mempalace_hook_settings", map[string]any{}, "local palace unavailable"},
			{"mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "queued with nothing running"}, "queued for the primary only"},
			{"mempalace_event_list", map[string]any{}, "primary is unreachable"},
		} {
			_, m := callWithin(t, h, limit, c.tool, c.args)
			if !strings.Contains(asString(m["error"])+asString(m["message"]), c.want) {
				t.Errorf("%s: %v, want %q", c.tool, m, c.want)
			}
		}
	})

	t.Run("primary up", func(t *testing.T) {
		h := start(t, harnessOpts{child: missing, timeout: timeout})
		h.primary.Handle([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"w","room":"r","content":"already on the primary"}}}`))
		names := toolNames(t, h)
		if len(names) < 30 {
			t.Fatalf("tools listed: %v", names)
		}
		defer func() {
			if t.Failed() {
				t.Log(h.logs.String())
			}
		}()
		_, m := callWithin(t, h, limit, "mempalace_search", map[string]any{"query": "already on the primary"})
		if m["degraded"] != true || !strings.Contains(mustJSON(m), "already on the primary") {
			t.Errorf("search with no local server: %v", m)
		}
		_, m = callWithin(t, h, limit, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written with no local server"})
		if m["queued"] != true {
			t.Fatalf("write with no local server: %v", m)
		}
		deadline := time.Now().Add(10 * time.Second)
		for h.primary.Dump().CountContent("written with no local server") == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := h.primary.Dump().CountContent("written with no local server"); n != 1 {
			t.Errorf("the queued write reached the primary %d times", n)
		}
	})
}

func asString(v any) string { s, _ := v.(string); return s }

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
