package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// postBasedResend is postBased saying the op is sent again after a lost
// answer (as an edge's outbox sends an op the ledger holds in doubt).
func (g *gw) postBasedResend(token string, args map[string]any, opID, base string) (int, map[string]any) {
	g.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": "mempalace_update_drawer", "arguments": args, "_meta": map[string]any{ledger.MetaKey: opID, ledger.ResendKey: "looked-up", origin.BaseKey: base}}})
	return g.post(token, string(b))
}

// An edit whose answer and look-up were lost (the op in doubt), sent
// again after another device edited the drawer, may have landed and been
// edited over: it is answered in doubt, never as a conflict, and nothing
// is written (attack66 N1). Before, it was refused -32033 "changed on the
// primary", and the edge told the agent its landed edit never reached the
// primary, and that retry was the way to overwrite.
func TestALostEditEditedOverIsInDoubtNotAConflict(t *testing.T) {
	t.Parallel()
	g := newCuttingGateway(t, startFake(t).url)
	ops, mal := g.tokens["ops"], g.tokens["mal"]
	a, rpc, _ := g.call(ops, "add_drawer", map[string]any{"wing": "team_b", "room": "n1", "content": "first text"})
	id := str(a["drawer_id"])
	if rpc != nil || id == "" {
		t.Fatalf("add_drawer: %v %v", a, rpc)
	}
	edit, op, base := map[string]any{"drawer_id": id, "content": "ops's text"}, opOf('c'), origin.Base("first text")
	g.proxy.Drop("mempalace_update_drawer")
	g.seen("mempalace_update_drawer", func() { g.proxy.Drop("mempalace_get_drawer") }) // the look-up after it
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": "mempalace_update_drawer", "arguments": edit, "_meta": map[string]any{ledger.MetaKey: op, origin.BaseKey: base}}})
	if status, m := g.post(ops, string(b)); status != http.StatusBadGateway {
		t.Fatalf("ops's edit, its answer and the look-up lost: %d %v", status, m)
	}
	if _, rpc, _ := g.call(mal, "update_drawer", map[string]any{"drawer_id": id, "content": "mal's later text"}); rpc != nil {
		t.Fatalf("mal's edit: %v", rpc)
	}
	status, m := g.postBasedResend(ops, edit, op, base)
	e, _ := m["error"].(map[string]any)
	if status != 200 || e == nil || e["code"] != float64(ledger.CodeInDoubt) || !strings.Contains(str(e["message"]), "may have landed") {
		t.Errorf("the resend of ops's lost edit after mal's: %d %v (want in doubt, code %d, not a conflict)", status, m, ledger.CodeInDoubt)
	}
	if got, _, _ := g.call(g.tokens["mw"], "get_drawer", map[string]any{"drawer_id": id}); got["content"] != "mal's later text" {
		t.Errorf("the primary's text after the resend: %q (want mal's, unwritten)", got["content"])
	}
	if status, m := g.postBasedResend(ops, edit, op, base); status != 200 || m["error"] == nil || m["error"].(map[string]any)["code"] != float64(ledger.CodeInDoubt) {
		t.Errorf("a second resend: %d %v (want in doubt again)", status, m)
	}
}

// The primary "already holding the update's own text" is exact bytes, as
// the base check is: an edit that differs from another device's newer
// text only in line endings, Unicode form or whitespace is refused as
// changed on the primary, not written over it (attack66 N3). Before, the
// gateway took it for its own text, wrote the device's bytes and said
// nothing.
func TestAnEditEqualButForSpellingIsStillAConflict(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	for i, c := range []struct{ theirs, mine string }{
		{"line1\nline2", "line1\r\nline2"},
		{"r\u00e9sum\u00e9 caf\u00e9", "re\u0301sume\u0301 cafe\u0301"},
		{"same words", "same words  "},
		{"para1 para2", "para1\n\npara2"},
	} {
		a, _, _ := g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "n3", "content": fmt.Sprintf("v0 of drawer %d", i)})
		id := str(a["drawer_id"])
		if _, rpc, _ := g.call(desk, "update_drawer", map[string]any{"drawer_id": id, "content": c.theirs}); rpc != nil {
			t.Fatal(rpc)
		}
		m := g.postBased(laptop, map[string]any{"drawer_id": id, "content": c.mine}, strings.Repeat(fmt.Sprintf("%02x", 0x10+i), 32), origin.Base(fmt.Sprintf("v0 of drawer %d", i)))
		if e, _ := m["error"].(map[string]any); e == nil || e["code"] != float64(ledger.CodeChangedOnPrimary) {
			t.Errorf("laptop's stale edit %q over desk's %q: %v (want refused, code %d)", c.mine, c.theirs, m, ledger.CodeChangedOnPrimary)
		}
		if got := primaryText(g, id); got != c.theirs {
			t.Errorf("the primary's text: %q, want desk's %q", got, c.theirs)
		}
	}
}

// A drawer laptop last wrote through the gateway, changed since around
// it, refuses laptop's stale edit without naming laptop as the last
// writer (attack66 N2): the gateway cannot tell that write from laptop's
// own, and says so. Before, "last written by device laptop-7f3a" read as
// "only my own text is there: retry is safe".
func TestAConflictAroundTheGatewayDoesNotNameTheRefusedDevice(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	laptop := g.tokens["laptop-7f3a"]
	a, _, _ := g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "n2", "content": "v0"})
	id := str(a["drawer_id"])
	if _, rpc, _ := g.call(laptop, "update_drawer", map[string]any{"drawer_id": id, "content": "v1 laptop"}); rpc != nil {
		t.Fatal(rpc)
	}
	g.around(t, "update_drawer", map[string]any{"drawer_id": id, "content": "v2 written on the primary directly"})
	m := g.postBased(laptop, map[string]any{"drawer_id": id, "content": "v2 laptop"}, strings.Repeat("2a", 32), origin.Base("v1 laptop"))
	e, _ := m["error"].(map[string]any)
	msg := str(e["message"])
	if e == nil || e["code"] != float64(ledger.CodeChangedOnPrimary) || strings.Contains(msg, "laptop-7f3a") || !strings.Contains(msg, "not through this gateway, or by this device's earlier write") {
		t.Errorf("laptop's edit of a drawer changed around the gateway: %v (want refused, naming no writer)", m)
	}
}

// A delete_drawer made on a text another device edited since is refused
// as changed on the primary, as an update is, and deletes nothing
// (attack66 N6); one whose base is the primary's text deletes. Before,
// the delete carried no check and removed the newer text for everyone.
func TestAStaleDeleteIsAConflict(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	admin, desk := g.tokens["admin-0001"], g.tokens["desk-9b21"]
	a, _, _ := g.call(admin, "add_drawer", map[string]any{"wing": "shared", "room": "n6", "content": "obsolete note, v0"})
	id := str(a["drawer_id"])
	if _, rpc, _ := g.call(desk, "update_drawer", map[string]any{"drawer_id": id, "content": "NOT obsolete: a new runbook step"}); rpc != nil {
		t.Fatal(rpc)
	}
	del := func(base string, op byte) map[string]any {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
			"name": "mempalace_delete_drawer", "arguments": map[string]any{"drawer_id": id}, "_meta": map[string]any{ledger.MetaKey: opOf(op), origin.BaseKey: base}}})
		_, m := g.post(admin, string(b))
		return m
	}
	m := del(origin.Base("obsolete note, v0"), 'a')
	if e, _ := m["error"].(map[string]any); e == nil || e["code"] != float64(ledger.CodeChangedOnPrimary) || !strings.Contains(str(e["message"]), "this delete would remove it unseen") {
		t.Errorf("a delete of the text desk edited since: %v (want refused, code %d)", m, ledger.CodeChangedOnPrimary)
	}
	if got := primaryText(g, id); got != "NOT obsolete: a new runbook step" {
		t.Errorf("the primary's text after the stale delete: %q (want desk's)", got)
	}
	if m := del(origin.Base("NOT obsolete: a new runbook step"), 'b'); m["error"] != nil || primaryText(g, id) != "" {
		t.Errorf("a delete of the primary's text: %v, the drawer still %q", m, primaryText(g, id))
	}
}

// A delete refused because the drawer's writer respelt it since (its own
// words, a trailing space: the drawer stays its) names the time of the
// respelling, not of the add, which came before the delete was made
// (attack107 F5: "last written by device lap-0002 at" the add's time).
func TestAStaleDeleteAfterARespellingNamesItsTime(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	admin, desk := g.tokens["admin-0001"], g.tokens["desk-9b21"]
	a, _, _ := g.call(desk, "add_drawer", map[string]any{"wing": "shared", "room": "f5", "content": "whitespace test drawer 5"})
	id := str(a["drawer_id"])
	g.advance(8 * time.Second) // admin's delete is made now, of the text it read
	g.advance(5 * time.Second)
	if _, rpc, _ := g.call(desk, "update_drawer", map[string]any{"drawer_id": id, "content": "whitespace test drawer 5 "}); rpc != nil {
		t.Fatal(rpc)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": "mempalace_delete_drawer", "arguments": map[string]any{"drawer_id": id}, "_meta": map[string]any{ledger.MetaKey: opOf('a'), origin.BaseKey: origin.Base("whitespace test drawer 5")}}})
	_, m := g.post(admin, string(b))
	e, _ := m["error"].(map[string]any)
	if want := "(last written by device desk-9b21 at 2026-11-30T12:00:13Z)"; e == nil || !strings.Contains(str(e["message"]), want) {
		t.Errorf("admin's delete of desk's drawer desk respelt since: %v, want it refused saying %s", m, want)
	}
	got, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id})
	if o := originOf(t, got); o == nil || o["device"] != "desk-9b21" || !strings.HasPrefix(str(o["at"]), "2026-11-30T12:00:13") {
		t.Errorf("desk's drawer after its respelling: origin %v, want desk-9b21's at the respelling", o)
	}
}

// An edge's delete_drawer of its own old copy of a drawer another device
// edited since is refused as changed on the primary (the edge sends the
// base of the text it deleted), dead at once; the primary keeps the
// newer text, and dropping the delete lets this device read it again
// (attack66 N6). Before, the delete removed the newer text for everyone.
func TestAnEdgesStaleDeleteKeepsTheNewerText(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	palace := filepath.Join(t.TempDir(), "palace")
	admin := edgeAt(t, g.http.URL+"/mcp", g.tokens["admin-0001"], palace)
	id, _ := edgeCall(t, admin, "add_drawer", map[string]any{"wing": "shared", "room": "n6", "content": "obsolete note, v0"})["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return primaryText(g, id) != "" })
	const newer = "NOT obsolete: a new runbook step"
	if _, rpc, _ := g.call(g.tokens["desk-9b21"], "update_drawer", map[string]any{"drawer_id": id, "content": newer}); rpc != nil {
		t.Fatal(rpc)
	}
	res := edgeCall(t, admin, "delete_drawer", map[string]any{"drawer_id": id})
	op, _ := res["edge"].(map[string]any)["op_id"].(string)
	if op == "" {
		t.Fatalf("the edge's delete: %v", res)
	}
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	o := settledOp(t, ob, op, "the edge's delete settled")
	if f := outbox.FailureOf(o.Error); o.State != outbox.Dead || f.Kind != outbox.ChangedOnPrimary {
		t.Errorf("the stale delete: %s %s (want dead, %s)", o.State, o.Error, outbox.ChangedOnPrimary)
	}
	if got := primaryText(g, id); got != newer {
		t.Fatalf("the primary's text after the stale delete: %q (want desk's)", got)
	}
	if _, _, err := ob.Drop(context.Background(), o.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the admin edge reading desk's text", func() bool {
		return edgeCall(t, admin, "get_drawer", map[string]any{"drawer_id": id})["content"] == newer
	})
}

// An admin device's delete made while the primary was down stays local
// (not queued); deleted again once the primary is back, as the answer
// says, it still carries the base of the text it deleted, kept with its
// tombstone: another device's edit made meanwhile is refused -32033, not
// deleted (attack68 F2). Before, the local palace no longer held the
// drawer, the delete carried no base and deleted the newer text.
func TestAnOfflineDeleteSentAgainKeepsTheNewerText(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	sw := newSwitchable(t, g.http.URL)
	palace := filepath.Join(t.TempDir(), "palace")
	admin := edgeAt(t, sw.url(), g.tokens["admin-0001"], palace)
	id, _ := edgeCall(t, admin, "add_drawer", map[string]any{"wing": "shared", "room": "f2", "content": "drawer Y: v0"})["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return primaryText(g, id) != "" })
	sw.down()
	edgeCall(t, admin, "search", map[string]any{"query": "drawer Y"}) // the edge finds the primary down
	if res := edgeCall(t, admin, "delete_drawer", map[string]any{"drawer_id": id}); !strings.HasPrefix(replication(res), "local only") {
		t.Fatalf("the offline delete: %v", res)
	}
	sw.up()
	const newer = "drawer Y: DESK's newer text, keep me"
	if _, rpc, _ := g.call(g.tokens["desk-9b21"], "update_drawer", map[string]any{"drawer_id": id, "content": newer}); rpc != nil {
		t.Fatal(rpc)
	}
	var op string
	waitUntil(t, "the delete sent again queued", func() bool {
		op, _ = edgeCall(t, admin, "delete_drawer", map[string]any{"drawer_id": id})["edge"].(map[string]any)["op_id"].(string)
		return op != ""
	})
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	o := settledOp(t, ob, op, "the delete settled")
	if f := outbox.FailureOf(o.Error); o.State != outbox.Dead || f.Kind != outbox.ChangedOnPrimary {
		t.Errorf("the delete sent again: %s %s (want dead, %s)", o.State, o.Error, outbox.ChangedOnPrimary)
	}
	if got := primaryText(g, id); got != newer {
		t.Fatalf("the primary's text after the delete sent again: %q (want desk's)", got)
	}
}
