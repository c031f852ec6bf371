package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/sqlitewal"
	"github.com/joakimp/devbox-config/testbed"
)

// The operator's story: an admin device deletes a drawer through the
// gateway; `gateway trash list` shows it, who deleted it and what it comes
// back as; `gateway trash restore` puts it back under the same id with the
// same content, and says so.
func TestGatewayTrashListAndRestore(t *testing.T) {
	_, up := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "upstream-token"})
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "upstream-token")
	cfg := emptyGatewayConfig(t)
	run := gatewayCLI(t, cfg)
	cli := func(want int, args ...string) string { t.Helper(); out, _ := run(want, args...); return out }
	cli(0, "device", "add", "ops-0001", "--label", "ops", "--read", "*", "--write", "*", "--admin")
	tok := strings.TrimSpace(cli(0, "token", "issue", "ops-0001"))
	if out := cli(0, "trash", "list"); !strings.Contains(out, "the trash is empty") {
		t.Fatalf("list before any delete: %q", out)
	}
	srv := &gateway.Server{ConfigFile: cfg, Upstream: up.URL(), UpstreamToken: func() string { return "upstream-token" }, BindHost: "127.0.0.1", Ledger: servesLedger(t, cfg)}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	defer watchGateway(srv)() // before Close: it reloads the devices added below
	call := func(tool string, args map[string]any) (map[string]any, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args}})
		req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		var r struct {
			Result struct{ Content []struct{ Text string } }
			Error  map[string]any
		}
		json.Unmarshal(w.Body.Bytes(), &r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: HTTP %d", tool, w.Code)
		}
		var m map[string]any
		if len(r.Result.Content) > 0 {
			json.Unmarshal([]byte(r.Result.Content[0].Text), &m)
		}
		return m, r.Error
	}
	added, _ := call("add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "rotate the staging keys on Fridays"})
	id := added["drawer_id"].(string)
	if res, rpcErr := call("delete_drawer", map[string]any{"drawer_id": id}); res["success"] != true {
		t.Fatalf("delete: %v %v", res, rpcErr)
	}
	if res, rpcErr := call("get_drawer", map[string]any{"drawer_id": id}); rpcErr == nil && !strings.Contains(fmt.Sprint(res["error"]), "not found") {
		t.Fatalf("not deleted: %v", res)
	}
	out := cli(0, "trash", "list")
	for _, want := range []string{"1  ", "delete_drawer by ops-0001 (ops): 1 drawer(s), deleted", id, "shared/notes", "comes back as the same id and content", "each kept 30 days"} {
		if !strings.Contains(out, want) {
			t.Errorf("trash list lacks %q:\n%s", want, out)
		}
	}
	cli(2, "trash", "restore", id) // no --upstream
	out = cli(0, "trash", "restore", "--upstream", up.URL(), id)
	for _, want := range []string{id + ": back under the same id, with the same content", "no restore brings back filed_at"} {
		if !strings.Contains(out, want) {
			t.Errorf("trash restore lacks %q:\n%s", want, out)
		}
	}
	if got, _ := call("get_drawer", map[string]any{"drawer_id": id}); got["content"] != "rotate the staging keys on Fridays" {
		t.Fatalf("not restored: %v", got)
	}
	if out := cli(1, "trash", "restore", "--upstream", up.URL(), "1"); !strings.Contains(out, "restored already") {
		t.Errorf("a second restore: %s", out)
	}
	if out := cli(0, "trash", "list"); !strings.Contains(out, "restored ") || !strings.Contains(out, " as "+id) {
		t.Errorf("list after the restore:\n%s", out)
	}
	if out := cli(0, "trash", "prune"); !strings.Contains(out, "pruned 0 delete(s) older than 30 days") {
		t.Errorf("prune: %s", out)
	}
	// Restoring an update's replaced version over a later one says where
	// the later one is kept, and trash list shows it, restorable.
	call("update_drawer", map[string]any{"drawer_id": id, "content": "rotate the staging keys on Mondays"})
	call("update_drawer", map[string]any{"drawer_id": id, "content": "rotate the staging keys daily"})
	out = cli(0, "trash", "restore", "--upstream", up.URL(), "2")
	if want := id + ": the replaced version is back in place, under the same id; what the drawer held (other content) is kept in the trash as delete 4 ('trash restore 4' puts it back)"; !strings.Contains(out, want) {
		t.Errorf("restoring an update's replaced version lacks %q:\n%s", want, out)
	}
	if out := cli(0, "trash", "list"); !strings.Contains(out, "4  ") || !strings.Contains(out, "update_drawer by operator (trash restore): 1 drawer(s), replaced; what restoring delete 2 replaced") {
		t.Errorf("list after restoring over a later version:\n%s", out)
	}
	// The bulk-delete grant: only on an admin device, set and taken back.
	cli(0, "device", "add", "laptop-7f3a", "--read", "shared")
	run(1, "device", "set", "laptop-7f3a", "--bulk-delete")
	if out := cli(0, "device", "set", "ops-0001", "--bulk-delete"); !strings.Contains(out, "; admin; bulk delete") {
		t.Errorf("set --bulk-delete: %s", out)
	}
	if c, _ := gateway.LoadConfig(cfg); !c.Device("ops-0001").BulkDelete || c.Device("laptop-7f3a").BulkDelete {
		t.Errorf("bulk_delete in the config: %+v", c.Devices)
	}
	cli(0, "device", "set", "ops-0001", "--bulk-delete=false")
}

// The operator restores a delete whose op the gateway's ledger still holds
// in doubt (its answer and the look-up after it were lost): the edge's
// resend of that op, which comes later, must be answered from the ledger,
// not delete the restored drawer again (attack26 F1). `trash restore`
// settles the op before putting the drawer back.
func TestGatewayTrashRestoreSettlesTheDeletesOp(t *testing.T) {
	_, up := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "upstream-token"})
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "upstream-token")
	cfg := emptyGatewayConfig(t)
	run := gatewayCLI(t, cfg)
	cli := func(want int, args ...string) string { t.Helper(); out, _ := run(want, args...); return out }
	cli(0, "device", "add", "ops-0001", "--label", "ops", "--read", "*", "--write", "*", "--admin")
	tok := strings.TrimSpace(cli(0, "token", "issue", "ops-0001"))
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(c.LedgerPath(), 0) // as gateway serve opens it
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := &gateway.Server{ConfigFile: cfg, Upstream: up.URL(), UpstreamToken: func() string { return "upstream-token" }, BindHost: "127.0.0.1", Ledger: gateway.OpLedger{L: l, Log: slog.New(slog.DiscardHandler)}}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	opID := strings.Repeat("d", 64)
	call := func(tool string, args map[string]any, meta map[string]any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args, "_meta": meta}})
		req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		var m map[string]any
		json.Unmarshal(w.Body.Bytes(), &m)
		return m
	}
	text := func(m map[string]any) map[string]any {
		var r map[string]any
		if c, _ := gjsonContent(m); c != "" {
			json.Unmarshal([]byte(c), &r)
		}
		return r
	}
	id := text(call("add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "the restore must stick"}, nil))["drawer_id"].(string)
	if d := call("delete_drawer", map[string]any{"drawer_id": id}, map[string]any{ledger.MetaKey: opID}); text(d)["success"] != true {
		t.Fatalf("delete: %v", d)
	}
	// What a lost answer and a lost look-up leave: the op in doubt.
	db, err := sqlitewal.Open(c.LedgerPath(), "NORMAL")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := db.Exec(`UPDATE ops SET state='doubt', result=NULL WHERE op_id=?`, opID); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("the delete's op is not in the ledger (%d rows)", n)
	}
	db.Close()
	cli(0, "trash", "restore", "--upstream", up.URL(), id)
	resent := call("delete_drawer", map[string]any{"drawer_id": id}, map[string]any{ledger.MetaKey: opID, ledger.ResendKey: "looked-up"})
	if r := text(resent); r["success"] != true {
		t.Errorf("the edge's resend after the restore: %v, want the ledger's answer", resent)
	}
	if got := text(call("get_drawer", map[string]any{"drawer_id": id}, nil)); got["content"] != "the restore must stick" {
		t.Fatalf("the resend deleted the restored drawer again: %v", got)
	}
}

// gjsonContent is a tools/call answer's first text content.
func gjsonContent(m map[string]any) (string, bool) {
	r, _ := m["result"].(map[string]any)
	cs, _ := r["content"].([]any)
	if len(cs) == 0 {
		return "", false
	}
	c, _ := cs[0].(map[string]any)
	s, ok := c["text"].(string)
	return s, ok
}

// `trash restore` makes the gateway's own start checks of --upstream and
// the upstream token, then asks the upstream before any write: each
// mistake an operator makes is refused with its fix, never "restart the
// gateway" (the running gateway was fine), a bare 404 or "unreachable",
// and nothing is restored until it is right.
func TestGatewayTrashRestoreChecksTheUpstreamFirst(t *testing.T) {
	primary, up := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "upstream-token"})
	cfg := emptyGatewayConfig(t)
	run := gatewayCLI(t, cfg)
	cli := func(want int, args ...string) string {
		t.Helper()
		out, errOut := run(want, args...)
		return out + errOut
	}
	cli(0, "device", "add", "ops-0001", "--label", "ops", "--read", "*", "--write", "*", "--admin")
	tok, _ := run(0, "token", "issue", "ops-0001")
	tok = strings.TrimSpace(tok)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(c.LedgerPath(), 0) // as gateway serve opens it: its answers say it is a gateway
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := &gateway.Server{ConfigFile: cfg, Upstream: up.URL(), UpstreamToken: func() string { return "upstream-token" }, BindHost: "127.0.0.1", Ledger: gateway.OpLedger{L: l, Log: slog.New(slog.DiscardHandler)}}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	gw := httptest.NewServer(srv)
	defer gw.Close()
	for _, tool := range []string{`add_drawer","arguments":{"wing":"shared","room":"notes","content":"kept in the trash"}`, `delete_drawer","arguments":{"drawer_id":"DRAWER"}`} {
		id := ""
		for d := range primary.Dump().Drawers {
			id = d
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_` + strings.Replace(tool, "DRAWER", id, 1) + `}}`
		if resp, b := testbed.Request(t, "POST", gw.URL+"/mcp", body, map[string]string{"Authorization": "Bearer " + tok}); resp.StatusCode != 200 || strings.Contains(b, `"error"`) {
			t.Fatalf("%s: %d %s", tool, resp.StatusCode, b)
		}
	}
	host := strings.TrimPrefix(up.URL(), "http://")
	closer := closesConnections(t) // as mempalace serve meets a TLS handshake, or a web server its crash
	for _, c := range []struct {
		token, upstream string
		exit            int
		says            string
	}{
		{"", up.URL(), 1, "no upstream token: every call would get the upstream's 401. Set MEMPALACE_UPSTREAM_TOKEN"},
		{"upstream-token", strings.TrimSuffix(up.URL(), "/mcp"), 2, "has no path (mempalace serve answers on /mcp): --upstream " + up.URL()},
		{"upstream-token", host, 2, "has no scheme: --upstream http://" + host},
		{"upstream-token", gw.URL + "/mcp", 1, "is a devbox-config gateway, not the primary: give mempalace serve's /mcp"},
		{"wrong-token", up.URL(), 1, "refused the upstream token (HTTP 401): set MEMPALACE_UPSTREAM_TOKEN in this shell"},
		{"upstream-token", strings.TrimSuffix(up.URL(), "/mcp") + "/mcp/", 2, `has the path "/mcp/" (mempalace serve answers on /mcp, lower case with no trailing slash): --upstream ` + up.URL()},
		// An upstream that answered is never "does not answer: EOF"
		// (outside tester, attack36 N4).
		{"upstream-token", "https://" + host, 1, "asks for TLS (https), and the server there answered in plain HTTP or closed the handshake: give http://" + host},
		{"upstream-token", "https://" + closer + "/mcp", 1, "give http://" + closer + "/mcp (mempalace serve speaks plain HTTP)"},
		{"upstream-token", "http://" + closer + "/mcp", 1, "took the connection and closed it without answering tools/list: it is not mempalace serve's /mcp"},
	} {
		t.Setenv("MEMPALACE_UPSTREAM_TOKEN", c.token)
		out := cli(c.exit, "trash", "restore", "--upstream", c.upstream, "1")
		if !strings.Contains(out, c.says) || strings.Contains(out, "restart the gateway") {
			t.Errorf("token %q, --upstream %s: %s\nwant it to say %q", c.token, c.upstream, out, c.says)
		}
	}
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "")
	if out := cli(1, "trash", "restore", "--no-upstream-token", "--upstream", up.URL(), "1"); !strings.Contains(out, "none was sent (--no-upstream-token): drop the flag") {
		t.Errorf("--no-upstream-token to a primary that asks for one: %s", out)
	}
	if !testing.Short() {
		// A primary that accepts and never answers: the first look gives
		// up in seconds, not the five and a half minutes an event_wait
		// may take (outside tester, attack36 N3).
		hung, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer hung.Close()
		t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "upstream-token")
		if out := cli(1, "trash", "restore", "--upstream", "http://"+hung.Addr().String()+"/mcp", "1"); !strings.Contains(out, "does not answer tools/list within 10s") {
			t.Errorf("a hung primary: %s", out)
		}
	}
	if out := cli(0, "trash", "list"); !strings.Contains(out, "comes back as") {
		t.Fatalf("a refused restore restored: %s", out)
	}
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "upstream-token")
	// The same delete named twice is restored once, and said once (it
	// was restored, then reported "not restored" the second time:
	// attack36 N5).
	if out := cli(0, "trash", "restore", "--upstream", up.URL(), "1", "1"); strings.Count(out, "back under the same id") != 1 || strings.Contains(out, "not restored") {
		t.Errorf("the restore once right: %s", out)
	}
}

// closesConnections is the address of a server that reads what it is
// sent and closes the connection without a word.
func closesConnections(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed at the test's end
			}
			c.Read(make([]byte, 4096)) // what it says is not read: closed on it
			c.Close()
		}
	}()
	return l.Addr().String()
}

// servesLedger is the op-id ledger of the gateway of cfg, opened as
// gateway serve opens it (a trash restore refuses a gateway that has
// served without one).
func servesLedger(t *testing.T, cfg string) gateway.OpLedger {
	t.Helper()
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(c.LedgerPath(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return gateway.OpLedger{L: l, Log: slog.New(slog.DiscardHandler)}
}

// A diary entry a restore found still on the primary (its delete never
// made) is said so, not as an entry written again.
func TestRestoredLineOfADiaryEntryStillThere(t *testing.T) {
	x := gateway.Restored{Drawer: trash.Drawer{ID: "diary_wing_pi_1", Kind: trash.KindDiary}, As: "diary_wing_pi_1", Already: true}
	if got, want := restoredLine(x), "diary_wing_pi_1: still on the primary: the delete did not happen; nothing written"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A diary entry a restore found on the primary with other text (updated
// since its delete was kept) is put back in place: said so, not as a new
// entry dated now under its own id.
func TestRestoredLineOfADiaryEntryPutBackInPlace(t *testing.T) {
	x := gateway.Restored{Drawer: trash.Drawer{ID: "diary_wing_pi_1", Kind: trash.KindDiary}, As: "diary_wing_pi_1", Kept: 7}
	got := restoredLine(x)
	for _, want := range []string{"back in place, under the same id", "delete 7"} {
		if !strings.Contains(got, want) {
			t.Errorf("got %q, want it to say %q", got, want)
		}
	}
	if strings.Contains(got, "new diary entry") {
		t.Errorf("got %q: an entry put back in place is not a new one", got)
	}
}
