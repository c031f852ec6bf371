package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// In a wing a device writes but does not read, filing content that is
// there already is answered as a new filing, byte for byte in the shape
// of one (add_drawer, and a checkpoint's item); in a wing it reads,
// MemPalace's already_exists stays (attack44 F6: the answer confirmed
// that exact content existed in a drop-box wing).
func TestAWriteOnlyWingDoesNotSayWhatIsThere(t *testing.T) {
	unreadAsNewFiling(t, func(t *testing.T) *upstream { return startFake(t) }, false)
}

// TestRealAWriteOnlyWingDoesNotSayWhatIsThere: the same against real
// MemPalace serve (its own answer's text is the shape to match).
func TestRealAWriteOnlyWingDoesNotSayWhatIsThere(t *testing.T) {
	unreadAsNewFiling(t, func(t *testing.T) *upstream { u, _ := startReal(t); return u }, true)
}

// unreadAsNewFiling is the test above against the upstream start gives
// (exact: its text's bytes are MemPalace's own, member order included;
// the double's are Go's, sorted).
func unreadAsNewFiling(t *testing.T, start func(t *testing.T) *upstream, exact bool) {
	g := newGWAt(t, []Device{
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, Admin: true},
		{ID: "alice", Label: "alice", Read: []string{"shared"}, Write: []string{"shared", "inbox"}},
	}, start(t))
	ops, alice := g.tokens["ops-0001"], g.tokens["alice"]
	for _, n := range []int{0, 1000} { // one drawer, and one MemPalace files in two chunks
		pad := strings.Repeat("x", n)
		there, fresh := "salary of bob is 90000"+pad, "salary of bob is 80000"+pad
		g.call(ops, "add_drawer", map[string]any{"wing": "inbox", "room": "hr", "content": there})
		got := rawText(t, g, alice, "add_drawer", map[string]any{"wing": "inbox", "room": "hr", "content": there})
		want := rawText(t, g, alice, "add_drawer", map[string]any{"wing": "inbox", "room": "hr", "content": fresh})
		if strings.Contains(got, "already_exists") || sameBut(t, got, want, exact) != "" {
			t.Errorf("alice's add_drawer of what inbox holds (%d chars):\n%s\nwant the shape of a new filing:\n%s", len(there), got, want)
		}
	}
	g.call(ops, "add_drawer", map[string]any{"wing": "inbox", "room": "hr", "content": "bob leaves in may"})
	res, rpc, _ := g.call(alice, "checkpoint", map[string]any{"items": []any{map[string]any{"wing": "inbox", "room": "hr", "content": "bob leaves in may"}}})
	added, _ := res["added"].([]any)
	if a, _ := firstOf(added).(map[string]any); rpc != nil || len(added) != 1 || a["reason"] != nil || a["wing"] != "inbox" || a["room"] != "hr" {
		t.Errorf("alice's checkpoint of what inbox holds: %v %v", res, rpc)
	}
	g.call(ops, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "a shared note"})
	if res, _, _ := g.call(alice, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "a shared note"}); res["reason"] != "already_exists" {
		t.Errorf("alice's add_drawer of what shared, which she reads, holds: %v", res)
	}
}

// rawText is the result text of a tools/call as the device receives it.
func rawText(t *testing.T, g *gw, token, tool string, args map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args}})
	_, m := g.post(token, string(b))
	content, _ := m["result"].(map[string]any)["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("%s: no result text: %v", tool, m)
	}
	return str(content[0].(map[string]any)["text"])
}

// sameBut is "" when a and b are the same text (exact) or the same JSON
// but for their drawer ids (each its own), else the first differing line
// of a.
func sameBut(t *testing.T, a, b string, exact bool) string {
	if !exact {
		a, b = reindented(t, a), reindented(t, b)
	}
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(la) != len(lb) {
		return a
	}
	for i := range la {
		if la[i] != lb[i] && !(strings.Contains(la[i], "drawer_inbox_hr_") && strings.Contains(lb[i], "drawer_inbox_hr_")) {
			return la[i]
		}
	}
	return ""
}

// reindented is JSON text as Go indents it, members sorted.
func reindented(t *testing.T, text string) string {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, text)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
