package join

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// A diary entry whose answer is lost every time it is sent, the primary
// answering everything else, holds back the entries of its wing behind
// it: each of them names that entry's op, not "not tried: the join was
// stopped" (review29 F2: the records behind an op the run tried and
// failed were blamed on the run).
func TestEntriesBehindALostOneNameIt(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	up := &url.URL{Scheme: "http", Host: pr.srv.Addr()}
	fwd := httputil.NewSingleHostReverseProxy(up)
	var mu sync.Mutex
	lost := "" // the entry whose every send is cut
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if gjson.GetBytes(body, "params.name").String() == "mempalace_diary_write" {
			entry := gjson.GetBytes(body, "params.arguments.entry").String()
			mu.Lock()
			if lost == "" {
				lost = entry
			}
			cut := entry == lost
			mu.Unlock()
			if cut {
				if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
					c.Close()
				}
				return
			}
		}
		r.Body, r.Host = io.NopCloser(bytes.NewReader(body)), up.Host
		fwd.ServeHTTP(w, r)
	}))
	defer front.Close()
	cfg := config(t, p, pr)
	cfg.URL = front.URL + "/mcp"
	rep := run(t, cfg, Options{Stall: 2 * time.Second})
	named := 0
	for _, f := range rep.Failed {
		switch {
		case strings.Contains(f.Error, "the join was stopped"):
			t.Errorf("blamed on the run: %s %s: %s", f.Kind, f.Record, f.Error)
		case f.Kind == Diaries && strings.Contains(f.Error, "it waits for op"):
			named++
		}
	}
	if named != 2 || rep.NotTried != 0 {
		t.Errorf("%d diary entries name the lost one's op, %d counted not tried; want 2 and 0: %+v", named, rep.NotTried, rep.Failed)
	}
}
