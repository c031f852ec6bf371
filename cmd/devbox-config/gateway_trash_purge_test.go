package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/testbed"
)

// A credential an admin deletes is purged from the trash for good, while
// the gateway runs: its content leaves trash.sqlite and its WAL, `trash
// list` says the operator purged it, and no restore files it (before:
// there was no purge; the content stayed trash_retention_days, 30 by
// default, in clear; attack44 F4).
func TestGatewayTrashPurgeRemovesTheContentForGood(t *testing.T) {
	_, up := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "upstream-token"})
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "upstream-token")
	cfg := emptyGatewayConfig(t)
	run := gatewayCLI(t, cfg)
	cli := func(want int, args ...string) string {
		t.Helper()
		out, errOut := run(want, args...)
		return out + errOut
	}
	cli(0, "device", "add", "ops-0001", "--label", "ops", "--read", "*", "--write", "*", "--admin", "--agents", "pi@ops")
	tok, _ := run(0, "token", "issue", "ops-0001")
	srv := &gateway.Server{ConfigFile: cfg, Upstream: up.URL(), UpstreamToken: func() string { return "upstream-token" }, BindHost: "127.0.0.1", Ledger: servesLedger(t, cfg)}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	send := func(tool string, args, meta map[string]any) []byte {
		t.Helper()
		params := map[string]any{"name": "mempalace_" + tool, "arguments": args}
		if meta != nil {
			params["_meta"] = meta
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		return w.Body.Bytes()
	}
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args}})
		req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		var r struct {
			Result struct{ Content []struct{ Text string } }
		}
		var m map[string]any
		if json.Unmarshal(w.Body.Bytes(), &r) != nil || len(r.Result.Content) == 0 || json.Unmarshal([]byte(r.Result.Content[0].Text), &m) != nil {
			t.Fatalf("%s: %s", tool, w.Body)
		}
		return m
	}
	const leak = "oops pasted AWS key AKIAEXAMPLE123 zebra"
	id := call("add_drawer", map[string]any{"wing": "shared", "room": "leak", "content": leak})["drawer_id"].(string)
	call("delete_drawer", map[string]any{"drawer_id": id})
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{c.TrashPath(), c.TrashPath() + "-wal"}
	inFiles := func() (in []string) {
		for _, f := range files {
			if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(leak)) {
				in = append(in, f)
			}
		}
		return in
	}
	if len(inFiles()) == 0 {
		t.Fatal("the trash's files never held the content: the check below proves nothing")
	}
	cli(1, "trash", "purge", "7")
	if out := cli(0, "trash", "purge", id); !strings.Contains(out, "purged "+id+" from delete(s) 1 for good") {
		t.Errorf("purge: %s", out)
	}
	if in := inFiles(); len(in) != 0 {
		t.Errorf("the purged content is still in %v", in)
	}
	if out := cli(0, "trash", "list"); !strings.Contains(out, "drawer "+id+" purged by the operator") || !strings.Contains(out, "its content is gone") || strings.Contains(out, leak) {
		t.Errorf("list after the purge:\n%s", out)
	}
	if out := cli(1, "trash", "restore", "--upstream", up.URL(), "1"); !strings.Contains(out, "purged by the operator on") {
		t.Errorf("restore of a purged drawer: %s", out)
	}
	if out := cli(1, "trash", "purge", id); !strings.Contains(out, "purged already") {
		t.Errorf("a second purge: %s", out)
	}
	// Restored, then purged: the purge and the list say the content is in
	// the palace, under which id (before: "its content is gone", and the
	// list lost the restore; attack46 N3).
	id2 := call("add_drawer", map[string]any{"wing": "shared", "room": "leak", "content": "a second leak AKIAEXAMPLE456"})["drawer_id"].(string)
	call("delete_drawer", map[string]any{"drawer_id": id2})
	cli(0, "trash", "restore", "--upstream", up.URL(), id2)
	live := "it was restored "
	if out := cli(0, "trash", "purge", id2); !strings.Contains(out, "drawer "+id2+" is not gone from the palace: "+live) || !strings.Contains(out, "as "+id2+" and is in the palace: delete it first") {
		t.Errorf("purge of a restored drawer:\n%s", out)
	}
	if out := cli(0, "trash", "list"); !strings.Contains(out, "its content is gone from the trash; "+live) {
		t.Errorf("list after the purge of a restored drawer:\n%s", out)
	}
	// Deleted again and purged: the note says what is true now, that a
	// later delete took it out of the palace, not "is in the palace:
	// delete it first" (attack47 N3).
	call("delete_drawer", map[string]any{"drawer_id": id2})
	if out := cli(0, "trash", "purge", id2); !strings.Contains(out, "purged "+id2+" from delete(s) 3 for good") || strings.Contains(out, "not gone from the palace") {
		t.Errorf("purge of the restored drawer deleted again:\n%s", out)
	}
	out := cli(0, "trash", "list")
	if strings.Contains(out, "is in the palace") || !strings.Contains(out, "as "+id2+", which delete 3 took out of the palace again at ") {
		t.Errorf("list after the restored drawer was deleted again and purged:\n%s", out)
	}
	// Restored, then its text replaced: the note says the later entry
	// replaced its text and the drawer is in the palace (before: "which
	// delete 5 took out of the palace again", attack51's LOW note).
	id3 := call("add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "a third drawer"})["drawer_id"].(string)
	call("delete_drawer", map[string]any{"drawer_id": id3})
	cli(0, "trash", "restore", "--upstream", up.URL(), id3)
	call("update_drawer", map[string]any{"drawer_id": id3, "content": "a third drawer, edited"})
	out = cli(0, "trash", "list")
	if strings.Contains(out, "which delete 5 took out of the palace") || !strings.Contains(out, "as "+id3+", whose text update_drawer 5 replaced at ") {
		t.Errorf("list after the restored drawer's text was replaced:\n%s", out)
	}
	// A diary entry purged by the command is still refused when a join
	// replays it: the command keys the digest it keeps as the running
	// gateway checks it (before, the purge took the text the replay was
	// matched by, and the entry was written again).
	entry := map[string]any{"agent_name": "pi", "entry": "the root password is AKIAEXAMPLE789", "wing": "wing_pi"}
	eid := call("diary_write", entry)["entry_id"].(string)
	call("delete_drawer", map[string]any{"drawer_id": eid})
	cli(0, "trash", "purge", eid)
	if b := send("diary_write", entry, map[string]any{origin.JoinKey: true}); !bytes.Contains(b, []byte("purged")) || bytes.Contains(b, []byte(`"success"`)) {
		t.Errorf("a join's replay of the purged entry: %s", b)
	}
}
