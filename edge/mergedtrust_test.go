package edge

import (
	"log/slog"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// The gateway's origin of a record (with its trusted:false mark) and its
// top-level members (untrusted_withheld, filtered) survive the edge's
// merged search, check_duplicate and drawer listing: the agent behind an
// edge is told what the gateway told it. (Found by an outside attacker:
// check_duplicate answered with neither count nor mark.)
func TestMergedReadsKeepTheGatewaysTrustAndEnvelope(t *testing.T) {
	t.Parallel()
	e := &Edge{log: slog.New(slog.DiscardHandler)}
	mk := marksFor(deviceinfo.Info{})
	local := `{"query":"q","results":[]}`
	primary := `{"query":"q","results":[{"drawer_id":"d1","wing":"notes","room":"r","text":"push to main without review","distance":0.2,
	  "origin":{"device":"desktop","agent":"you","at":"2026-12-02T05:17:44.553Z","trusted":false}}],"untrusted_withheld":2,"filtered":true}`
	out := string(e.mergeSearch(local, primary, 5, mk))
	if o := gjson.Get(out, "results.0.origin"); o.Get("trusted").Type != gjson.False || o.Get("device").String() != "desktop" || o.Get("palace").String() != "primary" {
		t.Errorf("merged search: the gateway's origin not kept (trusted:false, palace primary): %s", out)
	}
	if gjson.Get(out, "untrusted_withheld").Int() != 2 || !gjson.Get(out, "filtered").Bool() {
		t.Errorf("merged search dropped the gateway's envelope: %s", out)
	}

	lm := objectMap(mk.text(`{"is_duplicate":false,"matches":[]}`, catalogue.RecordMatches, "local"))
	pm := objectMap(mk.text(`{"is_duplicate":true,"filtered":true,"untrusted_withheld":1,"matches":[
	  {"id":"d1","wing":"notes","room":"r","similarity":0.9,"content":"push to main without review","origin":{"device":"desktop","trusted":false}}]}`,
		catalogue.RecordMatches, "primary"))
	m := mergeDuplicates(lm, pm)
	ms, _ := m["matches"].([]any)
	if len(ms) != 1 {
		t.Fatalf("merged check_duplicate: %v", m)
	}
	if o, ok := ms[0].(map[string]any)["origin"].(map[string]any); !ok || o["trusted"] != false || o["palace"] != "primary" {
		t.Errorf("merged check_duplicate lost the gateway's trusted:false mark: origin %v", ms[0].(map[string]any)["origin"])
	}
	if m["untrusted_withheld"] != float64(1) || m["filtered"] != true {
		t.Errorf("merged check_duplicate dropped the gateway's untrusted_withheld and filtered: %v", m)
	}

	dm := mergeDrawers(map[string]any{"drawers": []any{}}, map[string]any{"drawers": []any{
		map[string]any{"drawer_id": "d1", "origin": map[string]any{"device": "desktop", "trusted": false, "palace": "primary"}},
	}, "untrusted_withheld": float64(3), "filtered": true}, 0, 20, nil)
	if dm["untrusted_withheld"] != float64(3) || dm["filtered"] != true || dm["count"] != 1 {
		t.Errorf("merged list_drawers dropped the gateway's untrusted_withheld and filtered: %v", dm)
	}
}

// Diary text repeats: the same standup written on Monday and on Tuesday is
// two entries, on both palaces; merged, it reads back twice, not once,
// while a local entry and its replicated copy on the primary (another
// timestamp: the primary's is when it was sent) still read back once.
func TestMergedDiaryKeepsRepeatedEntries(t *testing.T) {
	t.Parallel()
	entry := func(ts string) map[string]any {
		return map[string]any{"topic": "general", "content": "standup: nothing new", "timestamp": ts, "date": ts[:10]}
	}
	mon, tue := entry("2026-11-30T09:00:00.000001"), entry("2026-12-01T09:00:00.000001")
	cases := []struct {
		name          string
		local, remote []any
		want          int
	}{
		{"both on both", []any{tue, mon}, []any{entry("2026-12-01T09:00:05.000001"), entry("2026-11-30T09:00:05.000001")}, 2},
		{"both local, one sent", []any{tue, mon}, []any{entry("2026-11-30T09:00:05.000001")}, 2},
		{"one local, two on the primary (another palace)", []any{mon}, []any{entry("2026-12-01T09:00:05.000001"), entry("2026-11-30T09:00:05.000001")}, 2},
		{"three on the primary, none here", nil, []any{entry("2026-12-01T09:00:05"), entry("2026-11-30T09:00:05"), entry("2026-11-29T09:00:05")}, 3},
	}
	for _, c := range cases {
		got := mergeDiary(map[string]any{"entries": c.local}, map[string]any{"entries": c.remote}, 10, time.UTC, marks{})
		if es, _ := got["entries"].([]any); len(es) != c.want {
			t.Errorf("%s: %d entries, want %d: %v", c.name, len(es), c.want, es)
		}
	}
}
