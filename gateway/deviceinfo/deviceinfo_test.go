package deviceinfo

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
)

var admin = Info{ID: "ops-0001", Label: "Jöns' laptop 💻", Admin: true, DeleteCap: 10, Read: []string{"*"}, Write: []string{"*"}, KG: "write",
	Agents: []string{"pi@ops"}, Refuses: []string{"sync", "mine"}, Trash: true, TrashRetentionDays: 30,
	Origins: 1, Trusts: []string{"ops-0001", "desk-9b21"}, Untrusted: "withhold", InstructionWing: "wing_instructions"}

// Both directions, both places: what is advertised reads back the same.
func TestRoundTrip(t *testing.T) {
	want := admin
	want.Version = Version
	h := http.Header{}
	h.Set(Header, admin.HeaderValue())
	v := h.Get(Header)
	for _, r := range v {
		if r < 0x20 || r >= 0x7f {
			t.Fatalf("the header holds %q: not printable ASCII: %s", r, v)
		}
	}
	if got, ok := FromHeader(h); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("from the header: %+v %v", got, ok)
	}
	init := []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"experimental":{"devbox-config/op-id-ledger":{"version":1}}},"serverInfo":{"name":"mempalace"}}}`)
	out := AdvertiseInitialize(init, admin)
	if gjson.GetBytes(out, `result.capabilities.experimental.devbox-config/op-id-ledger.version`).Int() != 1 || !gjson.GetBytes(out, "result.capabilities.tools").IsObject() {
		t.Fatalf("advertising dropped what was there: %s", out)
	}
	got, ok := FromInitialize(json.RawMessage(gjson.GetBytes(out, "result").Raw))
	if !ok || !reflect.DeepEqual(got, want) || !got.Refused("mempalace_sync") || !got.Refused("mine") || got.Refused("delete_drawer") {
		t.Fatalf("from initialize: %+v %v", got, ok)
	}
	// The documented example's shape: every field, lists never null.
	var m map[string]any
	json.Unmarshal(Info{ID: "d"}.encode(), &m)
	for _, k := range []string{"version", "id", "label", "admin", "bulk_delete", "delete_cap", "read", "write", "kg", "agents", "coordinator", "refuses", "trash", "trash_retention_days",
		"origins", "trusts", "untrusted", "instruction_wing"} {
		if _, ok := m[k]; !ok {
			t.Errorf("field %s missing: %v", k, m)
		}
	}
	if m["read"] == nil || m["refuses"] == nil {
		t.Errorf("an empty list is null: %v", m)
	}
	if m["trusts"] != nil || !(Info{}).TrustsDevice("unknown") || !got.TrustsDevice("desk-9b21") || got.TrustsDevice("laptop-7f3a") || got.TrustsDevice("unknown") {
		t.Errorf("trusts: null is every device, a list only those: %v", m["trusts"])
	}
}

// What is not an advertisement is not read as one, and an answer that is
// not an initialize result is passed through unchanged.
func TestAbsentOrMalformed(t *testing.T) {
	if _, ok := FromHeader(http.Header{}); ok {
		t.Error("no header read as an advertisement")
	}
	for _, v := range []string{"admin", `{"id":"x","admin":true}`, `{"version":0,"admin":true}`, `{"version":"1"}`, `{"version":1,"admin":"yes"}`} {
		if in, ok := FromHeader(http.Header{Header: {v}}); ok {
			t.Errorf("header %q read as %+v", v, in)
		}
	}
	if in, ok := FromHeader(http.Header{Header: {`{"version":2,"id":"x","admin":true,"future":1}`}}); !ok || !in.Admin || in.ID != "x" {
		t.Errorf("a later version is read for the fields this one knows: %+v %v", in, ok)
	}
	for _, resp := range []string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x"}}`, `{"result":{"capabilities":[]}}`, `event: message`} {
		if out := AdvertiseInitialize([]byte(resp), admin); string(out) != resp {
			t.Errorf("changed %s into %s", resp, out)
		}
	}
	if _, ok := FromInitialize(json.RawMessage(`{"capabilities":{"tools":{}}}`)); ok {
		t.Error("a plain MemPalace initialize read as an advertisement")
	}
	if !strings.Contains(string(admin.encode()), `\ud83d\udcbb`) {
		t.Errorf("a character outside the BMP: %s", admin.encode())
	}
}

// BenchmarkHeaderValue is what a device's header costs the gateway once
// per config load: the object encoded and escaped.
func BenchmarkHeaderValue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = admin.HeaderValue()
	}
}

// A diary agent name with "@" (the mailbox identity, claude@nar) is
// refused saying the diary's agent is the part before it, not by the
// globs of a wing ("wing_claude@nar") no grant makes writable.
func TestDiaryAgentWithAtNamesTheDiaryAgent(t *testing.T) {
	in := Info{Write: []string{"wing_claude"}, Agents: []string{"claude@nar"}}
	for name, c := range map[string]struct {
		tool string
		args map[string]any
	}{
		"diary_write": {"diary_write", map[string]any{"agent_name": "claude@nar", "entry": "hello"}},
		"checkpoint":  {"checkpoint", map[string]any{"diary": map[string]any{"agent_name": "claude@nar", "entry": "hello"}}},
	} {
		tool, _ := catalogue.Lookup(c.tool)
		ok, rule, _ := in.AuthorizeWrite(tool, c.args, "")
		if ok || !strings.Contains(rule, `"claude"`) || !strings.Contains(rule, "wing_claude") || strings.Contains(rule, "wing_claude@") {
			t.Errorf("%s as claude@nar: %v %q", name, ok, rule)
		}
	}
	tool, _ := catalogue.Lookup("diary_write")
	if ok, rule, _ := in.AuthorizeWrite(tool, map[string]any{"agent_name": "claude", "entry": "hello"}, ""); !ok {
		t.Errorf("diary_write as claude: %q", rule)
	}
}
