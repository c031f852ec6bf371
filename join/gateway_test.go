package join

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed"
)

// Through a devbox-config gateway: the device's grants and stamp apply,
// and three palaces (the third holding the first's records) land each
// record once. (Every send carries its op id in _meta, edge.FlushTarget's
// doing; this gateway does not wire the op-id ledger yet.)
func TestJoinThroughTheGateway(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project", "wing_*"}, KG: "write", Agents: []string{"opencode@desk"}}})
	tok := tokens["desk-9b21"]
	for i, tag := range []string{"a", "b", "a"} {
		p := newPalace(t)
		fill(t, p, tag)
		p.policy(t, localWorkspace)
		p.save(t)
		c := config(t, p, pr)
		c.URL, c.Token = url, func() string { return tok }
		rep := run(t, c, Options{Verify: All})
		if !rep.OK() {
			t.Fatalf("join %s through the gateway: %+v", tag, rep)
		}
		if rep.Calls["primary add_drawer"] == 0 {
			t.Fatalf("join %s sent nothing through the gateway", tag)
		}
		if rep.Verified == 0 || rep.Calls["primary get_drawers"] != 1 || rep.Calls["primary get_drawer"] != 0 {
			t.Fatalf("join %s verified %d, calls %v; want one get_drawers through the gateway", tag, rep.Verified, rep.Calls)
		}
		if i == 2 && (rep.Sent[Drawers] != 0 || rep.Sent[Diaries] != 0 || rep.Skipped[Diaries] != 3) {
			t.Fatalf("a third palace holding palace a's records: sent %v skipped %v", rep.Sent, rep.Skipped)
		}
	}
	st := exactlyOnce(t, pr)
	if len(st.Drawers) != 17 || len(st.Triples) != 6 {
		t.Fatalf("primary holds %d drawers and %d facts, want 17 and 6", len(st.Drawers), len(st.Triples))
	}
	for _, d := range st.Drawers {
		if !d.Diary && !strings.HasSuffix(d.AddedBy, "/desk/desk-9b21") {
			t.Errorf("the gateway's stamp is missing: %s added_by %q", d.ID, d.AddedBy)
		}
	}
}

// frontGateway is a devbox-config gateway with devices (a token issued
// to each) in front of a fresh test double: the primary, the gateway's
// /mcp URL and the tokens by device id.
func frontGateway(t *testing.T, devices []gateway.Device) (pr *primary, url string, tokens map[string]string) {
	t.Helper()
	return gatewayFront(t, devices, false)
}

// gatewayFront is frontGateway, with the gateway's op-id ledger wired
// (as `gateway serve` wires it) when withLedger.
func gatewayFront(t *testing.T, devices []gateway.Device, withLedger bool) (pr *primary, url string, tokens map[string]string) {
	t.Helper()
	return gatewayFrontOf(t, devices, withLedger, fakepalace.Options{})
}

// gatewayFrontOf is gatewayFront in front of a primary made with opts
// (another release).
func gatewayFrontOf(t *testing.T, devices []gateway.Device, withLedger bool, opts fakepalace.Options) (pr *primary, url string, tokens map[string]string) {
	t.Helper()
	pr, url, tokens, _ = gatewayAndTrash(t, devices, withLedger, opts)
	return pr, url, tokens
}

// gatewayAndTrash is gatewayFrontOf with the operator's trash restore
// (gateway trash restore: a delete's number or a drawer id).
func gatewayAndTrash(t *testing.T, devices []gateway.Device, withLedger bool, opts fakepalace.Options) (pr *primary, url string, tokens map[string]string, restore func(ref string)) {
	t.Helper()
	up, srv := testbed.Primary(t, opts, fakepalace.HTTPOptions{Token: "upstream-secret"})
	url, tokens, restore = gatewayOver(t, devices, withLedger, srv.URL(), "upstream-secret")
	return &primary{pl: up, srv: srv}, url, tokens, restore
}

// gatewayOver is a devbox-config gateway with devices in front of the
// upstream at upstream (its token upToken): its /mcp URL, the tokens by
// device id, and the operator's trash restore.
func gatewayOver(t *testing.T, devices []gateway.Device, withLedger bool, upstream, upToken string) (url string, tokens map[string]string, restore func(ref string)) {
	t.Helper()
	dir := t.TempDir()
	cfg := &gateway.Config{SecretFile: filepath.Join(dir, "secret"), AuditLog: filepath.Join(dir, "audit.jsonl"), Devices: devices}
	key, err := gateway.LoadSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tokens = map[string]string{}
	for i := range cfg.Devices {
		if tokens[cfg.Devices[i].ID], err = gateway.Issue(key, &cfg.Devices[i], time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(dir, "gateway.jsonc")
	if err := cfg.Save(cfgFile); err != nil {
		t.Fatal(err)
	}
	gw := &gateway.Server{ConfigFile: cfgFile, Upstream: upstream, UpstreamToken: func() string { return upToken }, BindHost: "127.0.0.1"}
	if withLedger {
		l, err := ledger.Open(filepath.Join(dir, ledger.FileName), 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		gw.Ledger = gateway.OpLedger{L: l, Log: slog.New(slog.DiscardHandler)}
	}
	if err := gw.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	h := httptest.NewServer(gw)
	t.Cleanup(h.Close)
	restore = func(ref string) {
		t.Helper()
		bin, err := gw.Trash()
		if err != nil {
			t.Fatal(err)
		}
		r := gateway.Restorer{Trash: bin, Upstream: upstream, Token: func() string { return upToken }}
		got, err := r.Restore(context.Background(), []string{ref})
		if err != nil {
			t.Fatalf("trash restore %s: %v", ref, err)
		}
		for _, d := range got {
			if d.Err != nil {
				t.Fatalf("trash restore %s: %v", ref, d.Err)
			}
		}
	}
	return h.URL + "/mcp", tokens, restore
}

// A join through a gateway whose upstream is down says what the gateway
// answered ("upstream unreachable"), not only the status's name (attack13
// 04: "rejected by transport ... Service Unavailable").
func TestJoinSaysWhyTheGatewayFailed(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@desk"}}})
	pr.srv.Stop()
	p := newPalace(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	rep := run(t, c, Options{Stall: 300 * time.Millisecond}) // the upstream refuses at once: nothing to wait for
	var said []string
	for _, f := range rep.Failed {
		if f.Kind == "primary" {
			said = append(said, f.Error)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "upstream unreachable") {
		t.Errorf("a join through a gateway whose upstream is down says %q, want the gateway's reason (upstream unreachable)", said)
	}
}

// A dry run of a device whose knowledge-graph grant is read says its
// facts would be refused, not only that they are to send (attack14 05:
// the first-day steps' --kg read, then join refused every fact, -31003).
func TestJoinDryRunSaysFactsAreRefused(t *testing.T) {
	t.Parallel()
	pr, url, tokens := frontGateway(t, []gateway.Device{
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"*"}, KG: "read", Agents: []string{"opencode@desk"}},
		{ID: "lap-1c2d", Label: "lap", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@lap"}},
	})
	p := newPalace(t)
	fill(t, p, "a")
	p.save(t)
	for id, want := range map[string]bool{"desk-9b21": true, "lap-1c2d": false} {
		c := config(t, p, pr)
		c.URL, c.Token = url, func() string { return tokens[id] }
		rep := run(t, c, Options{DryRun: true})
		if rep.Pending[Facts] == 0 {
			t.Fatalf("%s: no facts to send: %+v", id, rep)
		}
		notes := strings.Join(rep.Notes, "\n")
		if said := strings.Contains(notes, "refuses") && strings.Contains(notes, "--kg write"); said != want {
			t.Errorf("%s (kg %v refused): notes say refused %v, want %v:\n%s", id, want, said, want, notes)
		}
	}
}

// A dry run of a device whose write grants do not cover a wing says the
// drawers and diaries there would be refused, with the rule the real run
// is refused by, as it says of facts; a device that writes every wing
// gets no such note. Before, they were counted "to send", with no note.
func TestJoinDryRunSaysDrawersAndDiariesAreRefused(t *testing.T) {
	t.Parallel()
	pr, url, tokens := frontGateway(t, []gateway.Device{
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project"}, KG: "write", Agents: []string{"opencode@desk"}},
		{ID: "lap-1c2d", Label: "lap", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@lap"}},
	})
	p := newPalace(t)
	fill(t, p, "a")
	p.save(t)
	const rule = "write globs do not match the target wing"
	for id, want := range map[string][]string{
		"desk-9b21": {`1 drawers in wing "workspace" (` + rule + `)`, `3 diaries in wing "wing_opencode" (` + rule + `)`},
		"lap-1c2d":  nil,
	} {
		c := config(t, p, pr)
		c.URL, c.Token = url, func() string { return tokens[id] }
		rep := run(t, c, Options{DryRun: true})
		notes := strings.Join(rep.Notes, "\n")
		for _, w := range want {
			if !strings.Contains(notes, "the gateway refuses this device's "+w) {
				t.Errorf("%s: the dry run's notes do not say %q:\n%s", id, w, notes)
			}
		}
		if want == nil && strings.Contains(notes, "refuses this device") {
			t.Errorf("%s writes every wing; the dry run says:\n%s", id, notes)
		}
	}
	// The real run fails them, refused by that rule.
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	rep := run(t, c, Options{})
	failed, refused := map[string]int{}, map[string]int{}
	for _, f := range rep.Failed {
		failed[f.Kind]++
		if strings.Contains(f.Error, rule) {
			refused[f.Kind]++ // one diary refused, the others wait behind it
		}
	}
	if failed[Drawers] != 1 || failed[Diaries] != 3 || refused[Drawers] != 1 || refused[Diaries] != 1 || len(rep.Failed) != 4 {
		t.Errorf("the real run's refusals: %v of %+v", refused, rep.Failed)
	}
	// and names the fix, as the dry run does (attack30 f1).
	if notes := strings.Join(rep.Notes, "\n"); !strings.Contains(notes, "`devbox-config gateway device set desk-9b21 --write ...`") || !strings.Contains(notes, "they failed") {
		t.Errorf("the real run's notes name no fix for the refusals:\n%s", notes)
	}
}

// gwCall sends one tools/call to a gateway as the device of token and
// returns its result's text decoded, or fails the test on a JSON-RPC error.
func gwCall(t *testing.T, url, token, tool string, args map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args}})
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Result struct{ Content []struct{ Text string } } `json:"result"`
		Error  map[string]any                            `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Error != nil || len(r.Result.Content) == 0 {
		t.Fatalf("%s through the gateway: %v %v", tool, r.Error, err)
	}
	var m map[string]any
	json.Unmarshal([]byte(r.Result.Content[0].Text), &m)
	return m
}

// A drawer and a diary entry the device wrote live (the edge replicated
// them), which an admin then deleted on the primary: the device's local
// palace still holds them, and neither its first join nor a later one that
// sends everything again (a corrected --origin-device) files them again.
// The report counts them as deleted on the primary, the join succeeds, and
// --verify does not call them missing (attack16 f4, f4c). A drawer an
// earlier join sent and an admin deleted after is not sent again either;
// --verify names it missing, saying where the delete may be.
func TestJoinLeavesWhatAnAdminDeletedDeleted(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens := frontGateway(t, []gateway.Device{
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project", "wing_*"}, KG: "write", Agents: []string{"opencode@desk"}},
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
	})
	desk, ops := tokens["desk-9b21"], tokens["ops-0001"]
	p := newPalace(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	drawer := gwCall(t, url, desk, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "a note 0"})["drawer_id"].(string)
	entry := gwCall(t, url, desk, "diary_write", map[string]any{"agent_name": "opencode", "entry": "a diary entry"})["entry_id"].(string)
	for _, id := range []string{drawer, entry} {
		if res := gwCall(t, url, ops, "delete_drawer", map[string]any{"drawer_id": id}); res["success"] != true {
			t.Fatalf("the admin's delete of %s: %v", id, res)
		}
	}
	gone := func(when string) {
		t.Helper()
		for _, d := range pr.pl.Dump().Drawers {
			if d.Content == "a note 0" || d.Content == "a diary entry" {
				t.Errorf("%s: the primary holds %q again (%s)", when, d.Content, d.ID)
			}
		}
	}
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return desk }
	for _, device := range []string{"", "desk-9b21"} {
		c.Device = device
		rep := run(t, c, Options{Verify: All})
		if !rep.OK() {
			t.Fatalf("join (--origin-device %q) after the admin's deletes: failed %+v mismatches %+v", device, rep.Failed, rep.Mismatches)
		}
		if rep.DeletedOnPrimary[Drawers] != 1 || rep.DeletedOnPrimary[Diaries] != 1 {
			t.Errorf("join (--origin-device %q): deleted on the primary %v, want a drawer and a diary entry", device, rep.DeletedOnPrimary)
		}
		gone("after a join (--origin-device " + device + ")")
	}
	// One an earlier join sent, deleted since: not sent again, and --verify
	// names it missing with where to look (this join sent nothing to ask).
	var sent string
	for _, d := range pr.pl.Dump().Drawers {
		if d.Content == "a note 1" {
			sent = d.ID
		}
	}
	gwCall(t, url, ops, "delete_drawer", map[string]any{"drawer_id": sent})
	rep := run(t, c, Options{Verify: All})
	if len(rep.Mismatches) != 1 || rep.Mismatches[0].Verdict != "missing" || !strings.Contains(rep.Mismatches[0].Detail, "gateway trash list") || len(rep.Failed) != 0 {
		t.Errorf("a join after a delete of what an earlier join sent: mismatches %+v failed %+v", rep.Mismatches, rep.Failed)
	}
	for _, d := range pr.pl.Dump().Drawers {
		if d.ID == sent {
			t.Errorf("the join sent %s again", sent)
		}
	}
}
