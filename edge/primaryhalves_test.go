package edge

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/gateway/ledger"
)

// attack102 F5: a get_drawers of drawers only the primary holds (another
// device's) whose answer from the primary is over the edge's bound on a
// direct serve is read from the primary again in halves, as the local
// palace's is: every drawer, in the order asked, not degraded, and the
// primary not marked down. Before: every id "not answered", the primary
// blamed. The bound is 16 KiB here.
func TestAGetDrawersTooLargeFromThePrimaryIsReadInHalves(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{primaryMaxAnswer: 16 << 10})
	ids := primaryOnlyDrawers(t, h.onPrimary)
	wantAllInOrder(t, h, ids)
	if !strings.Contains(h.logs.String(), "read from the primary in parts") {
		t.Error("the edge did not log a read in parts: the answer was not over the bound, and the test proves nothing")
	}
}

// attack102 F5 through a gateway: its 502 for an answer over its cap
// ("a read applies nothing: ask for less (fewer ids ...)") has the edge
// ask the primary in halves, not call the primary failed. The gateway
// here refuses a get_drawers of more than 2 ids so.
func TestAGetDrawersTheGatewayFindsTooLargeIsReadInHalves(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	up, _ := url.Parse(srv.URL())
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(up)
		r.Out.URL.Path = r.In.URL.Path // not joined to up's
	}}
	var refused atomic.Int64
	var huge atomic.Value // an id whose drawer alone the gateway finds too large
	huge.Store("")
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		asked := gjson.GetBytes(b, "params.arguments.drawer_ids")
		if gjson.GetBytes(b, "params.name").String() == "mempalace_get_drawers" && (len(asked.Array()) > 2 || huge.Load() != "" && strings.Contains(asked.Raw, huge.Load().(string))) {
			refused.Add(1)
			ledger.Advertise(w.Header())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"upstream answer over 64 MiB: refused; a read applies nothing: ask for less (fewer ids, a smaller limit)"}}`, gjson.GetBytes(b, "id").Raw)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	h := start(t, harnessOpts{primaryURL: front.URL + up.Path})
	ids := primaryOnlyDrawers(t, func(name string, args map[string]any) map[string]any {
		return postTool(t, srv.URL(), testToken, name, args)
	})
	wantAllInOrder(t, h, ids)
	if refused.Load() == 0 {
		t.Error("the gateway refused no get_drawers as too large: the test proves nothing")
	}
	huge.Store(ids[2].(string))
	m, _ := h.call("get_drawers", map[string]any{"drawer_ids": ids})
	results, _ := m["results"].([]any)
	for i, r := range results {
		d, _ := r.(map[string]any)
		msg := fmt.Sprint(d["error"])
		switch {
		case i == 2 && (!strings.HasPrefix(msg, "not answered") || !strings.Contains(msg, "upstream answer over 64 MiB") || strings.Contains(msg, "failed")):
			t.Errorf("the drawer too large alone: %.300s; want not answered, naming the gateway's cap, nothing failed", msg)
		case i != 2 && d["error"] != nil:
			t.Errorf("result %d beside a drawer too large alone: %.300s; want the drawer", i, msg)
		}
	}
	if e, _ := m["edge"].(map[string]any); len(results) != len(ids) || e["degraded"] != true || e["not_answered"] != 1.0 {
		t.Errorf("get_drawers with a drawer too large alone: %.600v", m)
	}
}

// primaryOnlyDrawers files six drawers of 1,500 euro signs on the
// primary (file), not through the edge: the local palace lacks them.
func primaryOnlyDrawers(t *testing.T, file func(string, map[string]any) map[string]any) []any {
	t.Helper()
	var ids []any
	for i := range 6 {
		m := file("add_drawer", map[string]any{"wing": "caps", "room": "r", "content": fmt.Sprintf("%d %s", i, strings.Repeat("€", 1500))})
		id, _ := m["drawer_id"].(string)
		if id == "" {
			t.Fatalf("add_drawer on the primary: %v", m)
		}
		ids = append(ids, id)
	}
	return ids
}

// wantAllInOrder: get_drawers of ids through the edge answers each, in
// order, from the primary, not degraded, and the primary is still up.
func wantAllInOrder(t *testing.T, h *harness, ids []any) {
	t.Helper()
	m, res := h.call("get_drawers", map[string]any{"drawer_ids": ids})
	results, _ := m["results"].([]any)
	if res.IsError || len(results) != len(ids) {
		t.Fatalf("get_drawers of %d drawers on the primary, over the bound: %.600s", len(ids), resultText(res))
	}
	for i, r := range results {
		d, _ := r.(map[string]any)
		if d["drawer_id"] != ids[i] || !strings.HasPrefix(fmt.Sprint(d["content"]), fmt.Sprint(i)+" ") || d["error"] != nil {
			t.Errorf("result %d is %.200v; want drawer %v", i, d, ids[i])
		}
	}
	if e, _ := m["edge"].(map[string]any); e["degraded"] == true || e["source"] != "local and primary" {
		t.Errorf("the answer's edge is %v; want from the primary, not degraded", e)
	}
	if !h.edge.remote.Up() {
		t.Errorf("the primary is marked down after an answer too large: %s", h.edge.remote.State())
	}
}
