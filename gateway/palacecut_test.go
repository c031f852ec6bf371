package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// palaceWithASpace is a primary as real MemPalace 3.11 answers with its
// palace at dir and no database yet (attack71 F3's repro): its status
// and /statusz name dir in sqlite_integrity, its status and list_wings
// say "Could not open missing database at dir/chroma.sqlite3."
func palaceWithASpace(t *testing.T, dir string) *upstream {
	var at atomic.Pointer[string]
	at.Store(&dir)
	return palaceAt(t, &at, func() {})
}

// palaceAt is palaceWithASpace with its palace at *dir as it is at each
// request (a primary restarted on another palace), calling statusz before
// it answers each /statusz.
func palaceAt(t *testing.T, at *atomic.Pointer[string], statusz func()) *upstream {
	answer := func(v any) string {
		text, _ := json.Marshal(v)
		quoted, _ := json.Marshal(string(text))
		return `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + string(quoted) + `}]}}`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		dir := *at.Load()
		integrity := map[string]any{"checked": false, "ok": nil, "palace": dir, "sqlite_path": dir + "/chroma.sqlite3", "error_count": 0, "errors": []any{},
			"reason": "no quick_check ran: " + dir + "/chroma.sqlite3 does not exist, so there was no SQLite database to open"}
		failed := map[string]any{"error": "Chroma database missing", "details": "Could not open missing database at " + dir + "/chroma.sqlite3.", "hint": "Run: mempalace status", "backend": "chroma"}
		switch {
		case r.URL.Path == "/statusz":
			statusz()
			json.NewEncoder(w).Encode(map[string]any{"ok": true, "palace": map[string]any{"backend": "chroma", "sqlite_integrity": integrity}})
		case strings.Contains(string(body), `"tools/list"`):
			io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}`)
		case strings.Contains(string(body), "mempalace_status"):
			status := map[string]any{"sqlite_integrity": integrity}
			for k, v := range failed {
				status[k] = v
			}
			io.WriteString(w, answer(status))
		default:
			io.WriteString(w, answer(failed))
		}
	}))
	t.Cleanup(srv.Close)
	return &upstream{name: "no database", url: srv.URL + "/mcp"}
}

// attack71 F3: a device that is not admin sees none of a palace path
// with spaces in status or list_wings (before: "[path cut: ...] palace
// (copy)/p/chroma.sqlite3"), whether the gateway learnt the path from the
// primary's /statusz at start or from a status answer; the admin device
// sees it whole.
func TestAPalacePathWithSpacesIsCutWhole(t *testing.T) {
	t.Parallel()
	const dir = "/tmp/attack71/prim2/my palace (copy)/p"
	for _, probe := range []bool{false, true} {
		t.Run(fmt.Sprintf("probe=%v", probe), func(t *testing.T) {
			t.Parallel()
			g := newGWAt(t, devices, palaceWithASpace(t, dir))
			tools := []string{"status", "list_wings", "get_taxonomy"}
			if probe {
				g.srv.ProbeUpstream(context.Background())
				tools = []string{"list_wings", "status"}
			}
			for _, tool := range tools {
				m, e, _ := g.call(g.tokens["desk-9b21"], tool, map[string]any{})
				if all := fmt.Sprint(m, e); strings.Contains(all, "palace (copy)") || strings.Contains(all, "chroma.sqlite3") || !strings.Contains(all, "Could not open missing database at [path cut") {
					t.Errorf("desk's %s: %s", tool, all)
				}
			}
			if m, _, _ := g.call(g.tokens["admin-0001"], "list_wings", map[string]any{}); !strings.Contains(fmt.Sprint(m["details"]), dir+"/chroma.sqlite3") {
				t.Errorf("admin's list_wings: %v", m)
			}
		})
	}
}

// attack75 F2: a gateway that started before its primary (the order at
// boot), or outlived a primary restarted on another palace, had not
// learnt the palace directory, and list_wings and get_taxonomy cut it
// only up to its first space until some device called status. An answer
// naming a path the gateway does not know as the palace's asks the
// primary's /statusz in the background, once per relearnEvery at most,
// and the answers after it are cut whole.
func TestThePalaceIsLearntWhenAnAnswerNamesAnother(t *testing.T) {
	t.Parallel()
	first, moved := "/srv/Down At Start/p", "/Users/me/Library/Application Support/mem palace/p"
	var at atomic.Pointer[string]
	at.Store(&first)
	var statusz atomic.Int32
	g := newGWAt(t, devices, palaceAt(t, &at, func() { statusz.Add(1) }))
	desk := g.tokens["desk-9b21"]
	cutWhole := func(tool, tail string) {
		t.Helper()
		m, e, _ := g.call(desk, tool, map[string]any{})
		if all := fmt.Sprint(m, e); strings.Contains(all, tail) || strings.Contains(all, "chroma.sqlite3") || !strings.Contains(all, "Could not open missing database at [path cut") {
			t.Errorf("desk's %s: %s", tool, all)
		}
	}
	learn := func(tool string) { // the answer that asks is cut by what is known then
		t.Helper()
		g.call(desk, tool, map[string]any{})
		g.srv.relearning.Wait()
	}
	learn("list_wings") // no probe: the gateway started first
	cutWhole("list_wings", "At Start")
	cutWhole("get_taxonomy", "At Start")
	if n := statusz.Load(); n != 1 {
		t.Fatalf("/statusz asked %d times for three answers naming the palace, want once", n)
	}

	at.Store(&moved) // the primary restarted on another palace
	g.advance(relearnEvery)
	learn("get_taxonomy")
	cutWhole("get_taxonomy", "Support/mem palace")
	cutWhole("list_wings", "Support/mem palace")
	if n := statusz.Load(); n != 2 {
		t.Fatalf("/statusz asked %d times in all, want once more for the moved palace", n)
	}

	other := "/opt/Other Palace/p" // moved again within relearnEvery: cut by its look
	at.Store(&other)
	g.advance(relearnEvery - time.Second)
	learn("list_wings")
	learn("list_wings")
	if n := statusz.Load(); n != 2 {
		t.Fatalf("/statusz asked %d times in all, want none more within %v", n, relearnEvery)
	}
}

// review25 F7: a primary slow to answer /statusz does not hold up the
// read whose answer made the gateway ask it (before, the read waited up
// to relearnWait); what it answers still serves the reads after.
func TestASlowStatuszDoesNotDelayTheRead(t *testing.T) {
	t.Parallel()
	dir := "/srv/Slow Palace/p"
	var at atomic.Pointer[string]
	at.Store(&dir)
	release := make(chan struct{})
	g := newGWAt(t, devices, palaceAt(t, &at, func() { <-release }))
	desk := g.tokens["desk-9b21"]
	start := time.Now()
	g.call(desk, "list_wings", map[string]any{})
	if took := time.Since(start); took >= relearnWait/2 {
		t.Errorf("list_wings took %v while /statusz was held", took)
	}
	close(release)
	g.srv.relearning.Wait()
	if m, e, _ := g.call(desk, "list_wings", map[string]any{}); strings.Contains(fmt.Sprint(m, e), "Palace/p") {
		t.Errorf("desk's list_wings after /statusz answered: %v %v", m, e)
	}
}
