package gateway

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// edgeAt is startEdge with the palace directory named, so the test can
// read its outbox as edge status does.
func edgeAt(t *testing.T, url, token, palace string) *mcp.ClientSession {
	t.Helper()
	return edgeWith(t, url, token, palace, []string{testbed.Self(t, fakepalace.ProgramName)}, append(os.Environ(), "MEMPALACE_PALACE_PATH="+palace), 3*time.Second)
}

// edgeWith is edgeAt with the local palace server's command and
// environment (a real mempalace-mcp) and the call timeout.
func edgeWith(t *testing.T, url, token, palace string, child, env []string, timeout time.Duration) *mcp.ClientSession {
	t.Helper()
	cfg := edge.Config{
		PrimaryURL: url, Token: func() string { return token }, Child: child, ChildEnv: env,
		Palace: palace, Agent: "opencode", CallTimeout: timeout, Probe: 10 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler),
	}
	return serveEdge(t, cfg)
}

// serveEdge runs an edge of cfg and connects an agent to it, both ended
// at the test's cleanup.
func serveEdge(t *testing.T, cfg edge.Config) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { edge.New(cfg).Serve(ctx, inR, outW); outW.Close(); close(done) }()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "opencode", Version: "0"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); cancel(); <-done })
	return s
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

func replication(m map[string]any) string {
	e, _ := m["edge"].(map[string]any)
	s, _ := e["replication"].(string)
	return s
}

// An admin device's delete through its edge reaches the primary behind a
// real gateway, which keeps the drawer in its trash; the restore brings it
// back with the same id and content, and the deleting edge sees it again
// (its tombstone retired when the delete landed).
func TestAnAdminEdgesDeleteReachesTheTrash(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	s := edgeAt(t, g.http.URL+"/mcp", g.tokens["admin-0001"], filepath.Join(t.TempDir(), "palace"))
	const content = "the on-call rota: ana, then bo"
	added := edgeCall(t, s, "add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
	id, _ := added["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return g.primary.Dump().Drawers[id] != nil })
	if m := edgeCall(t, s, "delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true || replication(m) != "queued" {
		t.Fatalf("the admin's delete: %v", m)
	}
	waitUntil(t, "the delete on the primary", func() bool { return g.primary.Dump().Drawers[id] == nil })
	ds := g.kept(t)
	if len(ds) != 1 || ds[0].Device != "admin-0001" || len(ds[0].Drawers) != 1 || ds[0].Drawers[0].ID != id || ds[0].Drawers[0].Content != content {
		t.Fatalf("the trash: %+v", ds)
	}
	if m := edgeCall(t, s, "search", map[string]any{"query": content}); strings.Contains(fmtJSON(m), id) {
		t.Fatalf("search shows the deleted drawer: %v", m)
	}
	rs, err := g.restorer(t).Restore(context.Background(), []string{id})
	if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].As != id {
		t.Fatalf("restore: %+v %v", rs, err)
	}
	if d := g.primary.Dump().Drawers[id]; d == nil || d.Content != content {
		t.Fatalf("the restored drawer: %+v", d)
	}
	if m := edgeCall(t, s, "get_drawer", map[string]any{"drawer_id": id}); m["content"] != content {
		t.Fatalf("the deleting edge does not see the restored drawer: %v", m)
	}
}

// A non-admin device's delete stays local: nothing reaches the primary,
// its merged reads hide the primary's copy, and edge status names it. An
// admin's delete over the gateway's delete_cap stays local too.
func TestANonAdminEdgesDeleteStaysLocal(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	url := g.http.URL + "/mcp"
	palace := filepath.Join(t.TempDir(), "palace")
	s := edgeAt(t, url, g.tokens["desk-9b21"], palace)
	const content = "rollback plan: revert the flag, then the migration"
	added := edgeCall(t, s, "add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
	id, _ := added["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return g.primary.Dump().Drawers[id] != nil })
	m := edgeCall(t, s, "delete_drawer", map[string]any{"drawer_id": id})
	if m["success"] != true || !strings.Contains(replication(m), "not admin-scoped") {
		t.Fatalf("the non-admin's delete: %v", m)
	}
	if m := edgeCall(t, s, "search", map[string]any{"query": content}); strings.Contains(fmtJSON(m), id) {
		t.Fatalf("search shows the deleted drawer: %v", m)
	}
	time.Sleep(300 * time.Millisecond) // what a queued delete would have had to reach the primary
	if g.primary.Dump().Drawers[id] == nil || len(g.kept(t)) != 0 {
		t.Fatal("a non-admin device's delete reached the primary")
	}
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	p := edge.NewPrimary(url, func() string { return g.tokens["desk-9b21"] }, slog.New(slog.DiscardHandler), edge.PrimaryOptions{Timeout: 2 * time.Second})
	defer p.Close()
	if r, err := edge.CheckTombstones(context.Background(), ob, p); err != nil || len(r.OnPrimary) != 1 || !strings.Contains(r.OnPrimary[0], id) {
		t.Fatalf("edge status: %+v %v", r, err)
	}

	admin := edgeAt(t, url, g.tokens["admin-0001"], filepath.Join(t.TempDir(), "palace"))
	var ids []any
	for i := range 11 {
		a := edgeCall(t, admin, "add_drawer", map[string]any{"wing": "shared", "room": "bulk", "content": "bulk note " + string(rune('a'+i))})
		ids = append(ids, a["drawer_id"])
	}
	waitUntil(t, "eleven drawers on the primary", func() bool { return len(g.primary.Dump().Drawers) == 12 })
	if m := edgeCall(t, admin, "delete_drawers", map[string]any{"drawer_ids": ids}); !strings.Contains(replication(m), "over the gateway's delete cap of 10") {
		t.Fatalf("a delete over the cap: %v", m)
	}
}

// edge status goes on past a deleted drawer the primary no longer shows
// (the operator deleted it there, as status told; the gateway answers
// "not visible to this device", as for a drawer in a wing the device
// cannot read): a later delete whose copy is still on the primary, a
// diary entry, is named (found by an outside tester: status stopped at
// the first such answer and named nothing after it).
func TestStatusGoesOnPastADrawerGoneFromThePrimary(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	url := g.http.URL + "/mcp"
	palace := filepath.Join(t.TempDir(), "palace")
	s := edgeAt(t, url, g.tokens["desk-9b21"], palace)
	added := edgeCall(t, s, "add_drawer", map[string]any{"wing": "shared", "room": "gone", "content": "to be cleaned up by the operator"})
	gone, _ := added["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return g.primary.Dump().Drawers[gone] != nil })
	if m := edgeCall(t, s, "delete_drawer", map[string]any{"drawer_id": gone}); m["success"] != true {
		t.Fatalf("deleting the drawer: %v", m)
	}
	if m, e, _ := g.call(g.tokens["admin-0001"], "delete_drawer", map[string]any{"drawer_id": gone}); m["success"] != true {
		t.Fatalf("the operator's delete on the primary: %v %v", m, e)
	}
	const entry = "diary after the cleanup"
	w := edgeCall(t, s, "diary_write", map[string]any{"agent_name": "pi", "entry": entry})
	entryID, _ := w["entry_id"].(string)
	waitUntil(t, "the diary entry on the primary", func() bool {
		for _, d := range g.primary.Dump().Drawers {
			if d.Content == entry {
				return true
			}
		}
		return false
	})
	if m := edgeCall(t, s, "delete_drawer", map[string]any{"drawer_id": entryID}); m["success"] != true {
		t.Fatalf("deleting the diary entry: %v", m)
	}
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	p := edge.NewPrimary(url, func() string { return g.tokens["desk-9b21"] }, slog.New(slog.DiscardHandler), edge.PrimaryOptions{Timeout: 2 * time.Second})
	defer p.Close()
	r, err := edge.CheckTombstones(context.Background(), ob, p)
	if err != nil || len(r.OnPrimary) != 1 || !strings.Contains(r.OnPrimary[0], "diary entry of pi") || !strings.Contains(r.OnPrimary[0], entry) || r.Unchecked != "" {
		t.Fatalf("edge status names the diary entry still on the primary, and checked every delete: %+v %v", r, err)
	}
	if len(r.NotSeen) != 0 || len(r.CheckErrors) != 0 {
		t.Fatalf("a device reading every wing: the gone drawer is gone (the primary's not found), not unseen: %+v", r)
	}
	// A device that does not read every wing cannot tell gone from unseen:
	// the gateway answers both alike.
	lp := edge.NewPrimary(url, func() string { return g.tokens["laptop-7f3a"] }, slog.New(slog.DiscardHandler), edge.PrimaryOptions{Timeout: 2 * time.Second})
	defer lp.Close()
	r, err = edge.CheckTombstones(context.Background(), ob, lp)
	if err != nil || !slices.ContainsFunc(r.NotSeen, func(l string) bool {
		return strings.HasPrefix(l, "drawer "+gone+": not on the primary, or not visible to this device")
	}) {
		t.Fatalf("edge status reports the gone drawer as such: %+v %v", r, err)
	}
}
