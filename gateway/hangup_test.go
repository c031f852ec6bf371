package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// hangUp sends a tools/call as the device and hangs up once the gateway
// has written the call's audit line ahead (it is on its way to the
// primary) and after more.
func (g *gw) hangUp(token, tool string, args map[string]any, after time.Duration) {
	g.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.http.URL+"/mcp", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %d before the client hung up", resp.StatusCode)
		}
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if es := g.auditLog(); len(es) > 0 && es[len(es)-1].Tool == "mempalace_"+tool && es[len(es)-1].Decision == VerdictPending {
			break
		}
	}
	time.Sleep(after)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		g.t.Fatalf("%s: %v, want the client's own hang-up", tool, err)
	}
}

// settledLine waits for the audit line of the last call of tool, written
// once the gateway has settled it: up to 30 s, since real serve files ten
// items of 99,000 characters in seconds and took over 5 s in CI 118's
// loaded integration tier (the line comes as soon as the write settles).
func (g *gw) settledLine(tool string) Entry {
	g.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		es := g.auditLog()
		if len(es) == 0 {
			continue
		}
		if e := es[len(es)-1]; e.Tool == "mempalace_"+tool && e.Decision != VerdictPending {
			return e
		}
	}
	g.t.Fatalf("no audit line for %s", tool)
	return Entry{}
}

// attack69 F8: a device that hangs up while its write is on the primary
// cut the gateway's forward and the look-ups that settle it: the record
// landed of unknown origin, and the audit line said 502. The write runs
// to its end: its records name the device, and its line says the device
// went away (499) with what the primary answered.
func TestAHungUpWriteIsStampedAndAuditedAsGone(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk := g.tokens["desk-9b21"]
	g.primary.SetLatency("mempalace_add_drawer", 300*time.Millisecond)
	g.primary.SetLatency("mempalace_checkpoint", 300*time.Millisecond)

	g.hangUp(desk, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "written by a device that hung up"}, 50*time.Millisecond)
	e := g.settledLine("add_drawer")
	if e.Status != StatusClientGone || e.UpstreamStatus != http.StatusOK || !strings.Contains(e.Note, "hung up") {
		t.Errorf("the add's audit line: status %d, upstream %d, note %q; want %d, 200 and a note that the device hung up", e.Status, e.UpstreamStatus, e.Note, StatusClientGone)
	}
	id := catalogue.DrawerID("shared", "r", "written by a device that hung up")
	if st, ok := g.srv.prov.Lookup(provenance.Drawer(id)); !ok || st.Device != "desk-9b21" {
		t.Errorf("the drawer's origin: %+v (known %v), want desk-9b21", st, ok)
	}

	var items []any
	for i := range 5 {
		items = append(items, map[string]any{"wing": "shared", "room": "cp", "content": hungUpItem(i)})
	}
	g.hangUp(desk, "checkpoint", map[string]any{"items": items}, 50*time.Millisecond)
	if e := g.settledLine("checkpoint"); e.Status != StatusClientGone || e.UpstreamStatus != http.StatusOK {
		t.Errorf("the checkpoint's audit line: status %d, upstream %d", e.Status, e.UpstreamStatus)
	}
	for i := range 5 {
		id := catalogue.DrawerID("shared", "cp", hungUpItem(i))
		if st, ok := g.srv.prov.Lookup(provenance.Drawer(id)); !ok || st.Device != "desk-9b21" {
			t.Errorf("checkpoint item %d's origin: %+v (known %v), want desk-9b21", i, st, ok)
		}
	}
}

// hungUpItem is a checkpoint item's text, each unlike the others (the
// fake primary's checkpoint files no near duplicate).
func hungUpItem(i int) string {
	return []string{"alpha ports moved to 8443", "bravo build cache lives on tmpfs", "charlie deploys on fridays only", "delta keeps its secrets in vault", "echo logs rotate hourly"}[i]
}

// TestRealHungUpWriteIsStamped: attack69 F8's reproduction in front of
// real MemPalace 3.11.0 serve: an add_drawer of 99,000 characters and a
// checkpoint of ten such items, their device hanging up while the
// primary files them: every record names the device, and each audit line
// says the device went away while the primary answered 200.
func TestRealHungUpWriteIsStamped(t *testing.T) {
	u, _ := startReal(t)
	g := newGWAt(t, []Device{{ID: "ci", Label: "ci", Read: []string{"wing_ci"}, Write: []string{"wing_ci"}, Agents: []string{"ci@ci"}}}, u)
	big := func(i int) string {
		return fmt.Sprintf("item %d: %s", i, strings.Repeat(fmt.Sprintf("word%d ", i), 99000/7))
	}
	g.hangUp(g.tokens["ci"], "add_drawer", map[string]any{"wing": "wing_ci", "room": "canceladd", "content": big(0)}, 20*time.Millisecond)
	if e := g.settledLine("add_drawer"); e.Status != StatusClientGone || e.UpstreamStatus != http.StatusOK {
		t.Errorf("the add's audit line: status %d, upstream %d", e.Status, e.UpstreamStatus)
	}
	ids := []string{catalogue.DrawerID("wing_ci", "canceladd", big(0))}
	var items []any
	for i := 1; i <= 10; i++ {
		items = append(items, map[string]any{"wing": "wing_ci", "room": "cancelcp", "content": big(i)})
		ids = append(ids, catalogue.DrawerID("wing_ci", "cancelcp", big(i)))
	}
	g.hangUp(g.tokens["ci"], "checkpoint", map[string]any{"items": items}, 100*time.Millisecond)
	if e := g.settledLine("checkpoint"); e.Status != StatusClientGone || e.UpstreamStatus != http.StatusOK {
		t.Errorf("the checkpoint's audit line: status %d, upstream %d", e.Status, e.UpstreamStatus)
	}
	for _, id := range ids {
		if st, ok := g.srv.prov.Lookup(provenance.Drawer(id)); !ok || st.Device != "ci" {
			t.Errorf("%s: origin %+v (known %v), want ci", id, st, ok)
		}
	}
}

// attack72 F2: a write whose device hung up while it waited for the
// write slot was audited with a note about what the primary answered,
// which it never saw. Its line says it waited and nothing was sent.
func TestAWriteHungUpWhileQueuedSaysNothingWasSent(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk := g.tokens["desk-9b21"]
	kept := map[string]any{"wing": "shared", "room": "r", "content": "a drawer a delete given up leaves"}
	if _, rpc, _ := g.call(desk, "add_drawer", kept); rpc != nil {
		t.Fatal(rpc)
	}
	keptID := catalogue.DrawerID("shared", "r", kept["content"].(string))
	if g.srv.writes.acquire(t.Context(), "the-test") != nil {
		t.Fatal("the test could not take the write slot")
	}
	// An add waits for the slot as it is sent, a delete (an admin's)
	// before it keeps what it removes: both are given up.
	g.hangUp(desk, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "queued, then given up"}, 20*time.Millisecond)
	added := g.settledLine("add_drawer")
	g.hangUp(g.tokens["admin-0001"], "delete_drawer", map[string]any{"drawer_id": keptID}, 20*time.Millisecond)
	deleted := g.settledLine("delete_drawer")
	g.srv.writes.release()
	for _, e := range []Entry{added, deleted} {
		if e.Status != StatusClientGone || e.UpstreamStatus != 0 || !strings.Contains(e.Note, "waited for the primary's write slot; nothing was sent") {
			t.Errorf("the queued %s's audit line: status %d, upstream %d, note %q; want %d and a note that it hung up while queued", e.Tool, e.Status, e.UpstreamStatus, e.Note, StatusClientGone)
		}
	}
	if res, rpc, _ := g.call(desk, "get_drawer", map[string]any{"drawer_id": catalogue.DrawerID("shared", "r", "queued, then given up")}); rpc == nil && res["error"] == nil {
		t.Error("the add given up in the queue was made")
	}
	if _, rpc, _ := g.call(desk, "get_drawer", map[string]any{"drawer_id": keptID}); rpc != nil {
		t.Errorf("the delete given up in the queue was made: %v", rpc)
	}
}

// A read whose device hung up before the primary answered had an audit
// line with upstream_status 502, the gateway's own status for the call
// it cut, under a note saying it was what the primary answered. The
// line has no upstream_status, and its note says the call ended with the
// device's hang-up: a tools/call read, a protocol method, a GET stream.
func TestAHungUpReadHasNoUpstreamStatus(t *testing.T) {
	t.Parallel()
	arrived, stop := make(chan string, 8), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Path
		select { // never answers: the gateway's call ends first
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(stop) })
	g := newGWAt(t, devices, &upstream{name: "silent", url: up.URL + "/mcp"})
	hangUp := func(method, path, body string) Entry {
		t.Helper()
		before := len(g.auditLog())
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, method, g.http.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+g.tokens["desk-9b21"])
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		select {
		case <-arrived: // on its way to the primary
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %s never reached the primary", method, path)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s %s: %v, want the client's own hang-up", method, path, err)
		}
		var line Entry
		waitUntil(t, path+"'s audit line", func() bool {
			es := g.auditLog()
			if len(es) > before {
				line = es[len(es)-1]
			}
			return len(es) > before
		})
		return line
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_kg_stats","arguments":{}}}`},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":2,"method":"ping"}`},
		{"GET", "/logstream/stream?to_agent=pi@desk", ""},
	} {
		e := hangUp(c.method, c.path, c.body)
		if e.Status != StatusClientGone || e.UpstreamStatus != 0 || e.Note != noteGoneCut {
			t.Errorf("%s %s %.40s: status %d, upstream_status %d, note %q; want %d, none, %q", c.method, c.path, c.body, e.Status, e.UpstreamStatus, e.Note, StatusClientGone, noteGoneCut)
		}
	}
}
