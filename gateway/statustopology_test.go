package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// mempalace_status answered to a device that is not admin names neither
// the palace's directory on the primary's disk nor its embedder (whose
// description names an openai-compat endpoint's URL): before, desk (reads
// every wing) got the answer whole, and laptop (two wings) its
// sqlite_integrity's palace and sqlite_path and its embedding_device. The
// admin device gets them; laptop's counts stay its wings'.
func TestStatusHidesThePrimarysTopologyFromDevicesNotAdmin(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	if _, e, _ := g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": "desk only"}); e != nil {
		t.Fatal(e)
	}
	if _, e, _ := g.call(g.tokens["laptop-7f3a"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "shared"}); e != nil {
		t.Fatal(e)
	}
	for _, c := range []struct {
		device string
		admin  bool
	}{{"admin-0001", true}, {"desk-9b21", false}, {"laptop-7f3a", false}} {
		m, e, _ := g.call(g.tokens[c.device], "status", map[string]any{})
		if e != nil {
			t.Fatalf("%s: %v", c.device, e)
		}
		integrity, _ := m["sqlite_integrity"].(map[string]any)
		_, dev := m["embedding_device"]
		_, dir := integrity["palace"]
		_, db := integrity["sqlite_path"]
		if dev != c.admin || dir != c.admin || db != c.admin || integrity["ok"] != true {
			t.Errorf("%s: embedding_device %v, sqlite_integrity %v", c.device, m["embedding_device"], integrity)
		}
		if c.device == "laptop-7f3a" {
			if wings, _ := m["wings"].(map[string]any); len(wings) != 1 || wings["shared"] == nil || m["total_drawers"] != float64(1) {
				t.Errorf("laptop's counts: %v, total %v", m["wings"], m["total_drawers"])
			}
		}
	}
}

// A status whose palace did not open says why in its error and details
// (MemPalace's _collection_open_error: a backend mismatch names the
// palace's directory); a device that is not admin gets them without the
// primary's paths and URLs, as its error answers are (the proto helper's
// note).
func TestStatusErrorHidesThePrimarysPathsFromDevicesNotAdmin(t *testing.T) {
	t.Parallel()
	const dir = "/srv/mempalace/palace"
	text, _ := json.Marshal(`{"error": "Palace backend mismatch", "details": "the palace at ` + dir + ` was made by chroma, not lance", "hint": "see https://mempalace.internal/docs", "backend": "chroma"}`)
	body := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + string(text) + `}]}}`
	g := newGWAt(t, devices, &upstream{name: "echo", url: echoing(t, func(string) string { return body })})
	for _, c := range []struct {
		device string
		admin  bool
	}{{"admin-0001", true}, {"desk-9b21", false}} {
		m, e, _ := g.call(g.tokens[c.device], "status", map[string]any{})
		if e != nil {
			t.Fatalf("%s: %v", c.device, e)
		}
		details, hint := fmt.Sprint(m["details"]), fmt.Sprint(m["hint"])
		if shown := strings.Contains(details, dir) || strings.Contains(hint, "mempalace.internal"); shown != c.admin || !strings.Contains(details, "was made by chroma") {
			t.Errorf("%s: details %q, hint %q", c.device, details, hint)
		}
	}
}

// A checkpoint whose item failed at the embedder names its URL in the
// item's error details; a device that is not admin, narrow or reading
// every wing, gets it cut (attack53 N1: the cut covered top-level fields
// and error answers only, and this is a result).
func TestCheckpointErrorsHideThePrimarysTopologyFromDevicesNotAdmin(t *testing.T) {
	t.Parallel()
	const where = "http://127.0.0.1:19801/v1/embeddings"
	text, _ := json.Marshal(`{"added": [], "duplicates": [], "errors": [{"index": 0, "error": "embedding failed", "details": "Embedding API request to ` + where + ` failed"}], "diary": null}`)
	body := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + string(text) + `}]}}`
	g := newGWAt(t, devices, &upstream{name: "echo", url: echoing(t, func(string) string { return body })})
	args := map[string]any{"items": []any{map[string]any{"wing": "shared", "room": "r", "content": "c"}}}
	for _, c := range []struct {
		device string
		admin  bool
	}{{"admin-0001", true}, {"desk-9b21", false}, {"laptop-7f3a", false}} {
		m, e, _ := g.call(g.tokens[c.device], "checkpoint", args)
		if e != nil {
			t.Fatalf("%s: %v", c.device, e)
		}
		details := fmt.Sprint(m["errors"])
		if shown := strings.Contains(details, where); shown != c.admin || !strings.Contains(details, "Embedding API request to") {
			t.Errorf("%s: errors %s", c.device, details)
		}
	}
}

// attack69 F1: the status of a palace with no quick_check verdict
// (MemPalace 3.11's _sqlite_integrity_payload: "reason" names the
// database's path) and any other string in the answer (check_error,
// errors, library_versions' unreadable) reach a device that is not admin
// without the primary's paths and URLs; the texts around them, the
// counts and the admin's answer are kept whole.
func TestStatusStringsHideThePrimarysPathsFromDevicesNotAdmin(t *testing.T) {
	t.Parallel()
	const dir = "/srv/attack69/primary/palace"
	status := map[string]any{
		"total_drawers": 1, "wings": map[string]any{"shared": 1}, "rooms": map[string]any{"r": 1},
		"protocol": "IMPORTANT — MemPalace Memory Protocol: 1. ON WAKE-UP: call mempalace_status", "backend": "chroma",
		"sqlite_integrity": map[string]any{
			"checked": false, "ok": nil, "palace": dir, "sqlite_path": dir + "/chroma.sqlite3", "error_count": 0, "errors": []any{"page 3: btree at " + dir + "/chroma.sqlite3"},
			"reason":      "no quick_check ran: " + dir + "/chroma.sqlite3 does not exist, so there was no SQLite database to open",
			"check_error": "unable to open " + dir + "/chroma.sqlite3",
		},
		"library_versions": map[string]any{"stale": false, "unreadable": map[string]any{"chromadb": "no baseline: " + dir + "/../venv/lib is unreadable, see https://pypi.internal/chromadb"}},
	}
	text, _ := json.Marshal(status)
	quoted, _ := json.Marshal(string(text))
	body := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + string(quoted) + `}]}}`
	g := newGWAt(t, devices, &upstream{name: "echo", url: echoing(t, func(string) string { return body })})
	for _, c := range []struct {
		device string
		admin  bool
	}{{"admin-0001", true}, {"desk-9b21", false}, {"laptop-7f3a", false}} {
		m, e, _ := g.call(g.tokens[c.device], "status", map[string]any{})
		if e != nil {
			t.Fatalf("%s: %v", c.device, e)
		}
		all := fmt.Sprint(m)
		integrity, _ := m["sqlite_integrity"].(map[string]any)
		reason := fmt.Sprint(integrity["reason"])
		if shown := strings.Contains(all, "/srv/attack69") || strings.Contains(all, "pypi.internal"); shown != c.admin {
			t.Errorf("%s: paths or URLs shown %v: %s", c.device, shown, all)
		}
		if !strings.Contains(reason, "no quick_check ran: ") || !strings.Contains(reason, " does not exist, so there was no SQLite database to open") || m["protocol"] != status["protocol"] || m["total_drawers"] != 1.0 {
			t.Errorf("%s: the texts around the paths, or the counts, were not kept: %s", c.device, all)
		}
	}
}
