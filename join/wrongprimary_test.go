package join

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A primary a join cannot use fails the dry run with doctor's finding and
// fix, exit 1, as the real run would fail (a dry run exited 0 with a clean
// table, stderr saying "primary unreachable; answering from the local
// palace"); the real run refuses a URL that answers as no MCP endpoint
// before queuing anything (it queued every record in a join outbox keyed
// by the wrong URL, and spun 30 s to say "accepted nothing").
func TestJoinRefusesAPrimaryItCannotUse(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	good := pr.srv.URL()
	const nobody = "http://127.0.0.1:1/mcp" // nothing listens on port 1
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hung.Close()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>a web page</html>")) }))
	defer web.Close()
	for _, c := range []struct {
		name, url, says string
		wrongURL        bool // the real run refuses it too (a down primary queues, as documented)
	}{
		{"no /mcp", strings.TrimSuffix(good, "/mcp"), "MEMPALACE_REMOTE_URL=" + good, true},
		{"https to http", "https://" + strings.TrimPrefix(good, "http://"), "cannot reach", true},
		{"no MCP endpoint", web.URL + "/mcp", "", true},
		{"nothing listening", nobody, "check that the primary runs", false},
		{"hung", hung.URL + "/mcp", "no answer within", false},
	} {
		cfg := config(t, p, pr)
		cfg.URL, cfg.Timeout = c.url, 500*time.Millisecond
		var logged bytes.Buffer
		cfg.Log = slog.New(slog.NewTextHandler(&logged, nil))
		// The report says what is wrong: no log line says the edge's
		// "primary unreachable; answering from the local palace" (it did,
		// over the report: attack36 N2).
		defer func() {
			if strings.Contains(logged.String(), "primary") {
				t.Errorf("%s: the join logged %s", c.name, logged.String())
			}
		}()
		rep := run(t, cfg, Options{DryRun: true})
		if rep.OK() || len(rep.Failed) != 1 || rep.Failed[0].Kind != "primary" || rep.Failed[0].Record != "connection" ||
			!strings.Contains(rep.Failed[0].Error, "doctor's primary-unreachable") || !strings.Contains(rep.Failed[0].Error, "Fix: ") || !strings.Contains(rep.Failed[0].Error, c.says) {
			t.Errorf("%s: the dry run reports %+v", c.name, rep.Failed)
		}
		if !c.wrongURL || testing.Short() && c.name != "no /mcp" {
			continue
		}
		rep = run(t, cfg, Options{})
		if rep.OK() || len(rep.Failed) != 1 || rep.Failed[0].Record != "connection" || !strings.Contains(rep.Failed[0].Error, "nothing was queued") || !strings.Contains(rep.Failed[0].Error, c.says) {
			t.Errorf("%s: the join reports %+v", c.name, rep.Failed)
		}
		if st, _ := readCheckpoint(p.dir); st[Target(c.url)].State != "" {
			t.Errorf("%s: the join checkpointed the wrong URL: %+v", c.name, st)
		}
		// Nothing is left behind keyed by the wrong URL (an empty join
		// outbox was: attack36).
		if left, _ := filepath.Glob(filepath.Join(p.dir, "edge", OutboxFile(Target(c.url))+"*")); len(left) > 0 {
			t.Errorf("%s: the join left %v for the wrong URL", c.name, left)
		}
	}
}
