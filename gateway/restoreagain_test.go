package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// A restore of a diary entry whose write reached the primary but whose
// answer was lost is finished by the next restore, which finds the entry
// the first one wrote rather than writing it again: before, the first
// restore let the entry go (Release) and the second wrote a second copy.
// A restore that stopped after the write and before recording it (the
// trash still holds it: restoring_at) is finished alike.
func TestASecondRestoreFinishesALostDiaryRestore(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin, desk := g.tokens["admin-0001"], g.tokens["desk-9b21"]
	ctx := context.Background()
	target, _ := url.Parse(g.up.url)
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	var lose atomic.Bool
	lose.Store(true)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.Host = target.Host
		if lose.Load() && strings.Contains(string(body), `"mempalace_diary_write"`) {
			proxy.ServeHTTP(httptest.NewRecorder(), r) // made; its answer lost
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	entries := func() []any {
		t.Helper()
		r, _, _ := g.call(desk, "diary_read", map[string]any{"agent_name": "pi"})
		return r["entries"].([]any)
	}
	for i, text := range []string{"found the flaky test", "bisected it to the clock"} {
		w, _, _ := g.call(desk, "diary_write", map[string]any{"agent_name": "pi", "entry": text, "topic": "ci"})
		entry := w["entry_id"].(string)
		g.call(admin, "delete_drawer", map[string]any{"drawer_id": entry})
		first := g.restorer(t)
		if i == 0 {
			first.Upstream = front.URL + "/mcp"
			if rs, err := first.Restore(ctx, []string{entry}); err != nil || rs[0].Err == nil {
				t.Fatalf("the restore whose answer was lost: %+v %v", rs, err)
			}
		} else { // stopped between the write and its record
			d := g.kept(t)[0]
			if _, err := first.Trash.Claim(ctx, d.ID, entry, first.fence(ctx, d.Drawers[0])); err != nil {
				t.Fatal(err)
			}
			if _, err := first.call(ctx, "mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": text, "topic": "ci", "wing": "wing_pi"}); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(entries()); n != i+1 {
			t.Fatalf("%q: %d entries after the first restore, want %d", text, n, i+1)
		}
		rs, err := g.restorer(t).Restore(ctx, []string{entry})
		if err != nil || rs[0].Err != nil || !strings.HasPrefix(rs[0].As, "diary_") {
			t.Fatalf("%q: the second restore: %+v %v", text, rs, err)
		}
		if n := len(entries()); n != i+1 {
			t.Fatalf("%q: %d entries after the second restore, want %d (written twice)", text, n, i+1)
		}
		if d := g.kept(t)[0].Drawers[0]; d.RestoredAs != rs[0].As || d.RestoringAt != nil {
			t.Fatalf("%q: the trash's record: %+v", text, d)
		}
	}
}
