package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// A check_duplicate match on a drawer longer than one chunk carries the
// chunk's id ({drawer_id}_chunk_{index:06d}, as MemPalace 3.11.0 names
// its rows): it reads with its drawer's writer, as the drawer's search
// hit does, so a device that trusts the writer and withholds the rest is
// shown the match, not told it is a duplicate of records withheld as
// untrusted (attack97 F7). A chunk of a drawer the gateway never stamped
// still reads as unknown.
func TestDuplicateMatchOnAChunkCarriesItsDrawersOrigin(t *testing.T) {
	t.Parallel()
	desk := devices[1]
	desk.Trusts, desk.Untrusted = []string{"laptop-7f3a"}, UntrustedWithhold
	g := newGW(t, []Device{devices[0], desk})
	if err := g.srv.prov.Record(context.Background(), provenance.Entry{Key: provenance.Drawer("drawer_shared_notes_abc"), Stamp: provenance.Stamp{Device: "laptop-7f3a", Label: "laptop"}}); err != nil {
		t.Fatal(err)
	}
	trusting := g.srv.cfg.Load().Device("desk-9b21")
	tool, _ := catalogue.Lookup("mempalace_check_duplicate")
	text := `{"is_duplicate": true, "matches": [` +
		`{"id": "drawer_shared_notes_abc_chunk_000013", "wing": "shared", "room": "notes", "similarity": 0.9, "content": "wombat"}, ` +
		`{"id": "drawer_shared_notes_abc_chunk_000002", "wing": "shared", "room": "notes", "similarity": 0.8, "content": "wombat"}, ` +
		`{"id": "drawer_shared_notes_zzz_chunk_000001", "wing": "shared", "room": "notes", "similarity": 0.7, "content": "wombat"}]}`
	env := encodeJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}})
	out, err := g.srv.filterAnswer(context.Background(), trusting, tool, Decision{Allow: true}, []byte("1"), env)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := answerText(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		IsDuplicate bool             `json:"is_duplicate"`
		Matches     []map[string]any `json:"matches"`
		Withheld    int              `json:"untrusted_withheld"`
	}
	if err := json.Unmarshal([]byte(m.Raw), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 2 || res.Withheld != 1 || !res.IsDuplicate {
		t.Fatalf("a device that trusts the writer of a two-chunk match: %d matches, %d withheld, is_duplicate %v; want laptop's 2 shown, the unstamped drawer's 1 withheld (%s)", len(res.Matches), res.Withheld, res.IsDuplicate, m.Raw)
	}
	for _, match := range res.Matches {
		if o := originOf(t, match); o["device"] != "laptop-7f3a" || o["trusted"] != true {
			t.Errorf("match %v: origin %v, want laptop-7f3a, trusted", match["id"], o)
		}
	}
}

// TestRealDuplicateMatchOnALongDrawer: real MemPalace answers
// check_duplicate of a drawer longer than one chunk with its chunks' ids;
// each match reads with the drawer's writer, and a device that trusts the
// writer and withholds the rest is shown them (attack97 F7).
func TestRealDuplicateMatchOnALongDrawer(t *testing.T) {
	u, _ := startReal(t)
	fast := func(d Device) Device { d.ReadRate, d.WriteRate = 1e9, 1e9; return d }
	desk := devices[1]
	desk.Trusts, desk.Untrusted = []string{"laptop-7f3a"}, UntrustedWithhold
	g := newGWAt(t, []Device{fast(devices[0]), fast(desk)}, u)
	long := "alpha " + strings.Repeat("wombat ", 1500)
	if res, rpc, _ := g.call(g.tokens["laptop-7f3a"], "add_drawer", map[string]any{"wing": "shared", "room": "farm", "content": long}); rpc != nil || res["success"] != true {
		t.Fatalf("add_drawer: %v %v", res, rpc)
	}
	res, rpc, _ := g.call(g.tokens["desk-9b21"], "check_duplicate", map[string]any{"content": long, "threshold": 0.5})
	matches, _ := res["matches"].([]any)
	if rpc != nil || len(matches) == 0 || res["untrusted_withheld"] != nil {
		t.Fatalf("check_duplicate for a device that trusts the writer: %v %v", res, rpc)
	}
	for _, m := range matches {
		id, _ := m.(map[string]any)["id"].(string)
		if o := originOf(t, m); !strings.Contains(id, "_chunk_") || o["device"] != "laptop-7f3a" || o["trusted"] != true {
			t.Errorf("match %s: origin %v, want a chunk of laptop-7f3a's drawer, trusted", id, o)
		}
	}
}
