package join

import (
	"log/slog"
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
	dir := t.TempDir()
	up, srv := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: "upstream-secret"})
	cfg := &gateway.Config{SecretFile: filepath.Join(dir, "secret"), AuditLog: filepath.Join(dir, "audit.jsonl"), Devices: devices}
	key, err := gateway.LoadSecret(cfg.SecretFile)
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
	gw := &gateway.Server{ConfigFile: cfgFile, Upstream: srv.URL(), UpstreamToken: func() string { return "upstream-secret" }, BindHost: "127.0.0.1"}
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
	return &primary{pl: up, srv: srv}, h.URL + "/mcp", tokens
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
	rep := run(t, c, Options{Stall: time.Second})
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
