package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
)

// Outside tester attack44 F3: a device removed at the gateway (lost or
// compromised) keeps queueing writes, refused; the user then puts another
// device's token in .env (keeping MEMPALACE_ORIGIN_DEVICE). `edge flush`
// sent the queued writes, and they landed as the other device's. Now the
// flusher holds them (dead, other-device, never sent) since the gateway
// names the token another device than the one they were queued as:
// doctor's device-identity is an error saying so, `edge status` lists them
// with the fix, and `edge outbox retry` sends one as the new device.
func TestARemovedDevicesQueuedWritesAreNotSentUnderTheNextToken(t *testing.T) {
	primary, up := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "upstream-token"})
	cfg := emptyGatewayConfig(t)
	gw := gatewayCLI(t, cfg)
	issue := func(id string) string { out, _ := gw(0, "token", "issue", id); return strings.TrimSpace(out) }
	gw(0, "device", "add", "tmp-0042", "--label", "tmpbox", "--read", "shared", "--write", "shared")
	gw(0, "device", "add", "wide-01", "--label", "wide", "--read", "*", "--write", "*")
	tmpTok, wideTok := issue("tmp-0042"), issue("wide-01")
	srv := &gateway.Server{ConfigFile: cfg, Upstream: up.URL(), UpstreamToken: func() string { return "upstream-token" }, BindHost: "127.0.0.1"}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	front := httptest.NewServer(srv)
	defer front.Close()

	home := t.TempDir()
	palace := filepath.Join(home, "palace")
	for k, v := range map[string]string{"HOME": home, "MEMPALACE_PALACE_PATH": palace, "MEMPALACE_REMOTE_URL": front.URL + "/mcp", "MEMPALACE_REMOTE_TOKEN": tmpTok,
		"MEMPALACE_EDGE": "1", "MEMPALACE_ORIGIN_DEVICE": "tmp-0042", "MEMPALACE_ORIGIN_LABEL": "tmpbox", "MEMPALACE_AGENT_NAME": ""} {
		t.Setenv(k, v)
	}
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "tmp-0042", "tmpbox") // the device's edge
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func(content string) {
		t.Helper()
		if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Wing: "shared",
			Payload: []byte(`{"wing":"shared","room":"tmp","content":"` + content + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	landed := func(content string) bool {
		for _, d := range primary.Dump().Drawers {
			if d.Content == content {
				return true
			}
		}
		return false
	}
	write("tmpbox first write")
	if code, out, errb := runCLI("edge", "flush"); code != 0 || !landed("tmpbox first write") {
		t.Fatalf("the device's own write: exit %d\n%s%s", code, out, errb)
	}

	gw(0, "device", "remove", "tmp-0042")
	srv.Reload()
	write("tmpbox write after removal")
	if code, out, _ := runCLI("edge", "flush"); code != 1 || !strings.Contains(out, "refused the token") {
		t.Fatalf("a removed device's flush: exit %d\n%s", code, out)
	}
	t.Setenv("MEMPALACE_REMOTE_TOKEN", wideTok) // another device's token, MEMPALACE_ORIGIN_DEVICE kept

	var out, errb strings.Builder
	run([]string{"doctor", "--home", home, "--json"}, &out, &errb)
	var doc struct {
		Findings []struct{ ID, Severity, Message, Fix string }
	}
	if err := json.Unmarshal([]byte(out.String()), &doc); err != nil {
		t.Fatalf("doctor --json: %v\n%s%s", err, out.String(), errb.String())
	}
	found := false
	for _, f := range doc.Findings {
		if f.ID == "device-identity" && f.Severity != "info" {
			found = true
			if f.Severity != "error" || !strings.Contains(f.Message, "1 write(s)") || !strings.Contains(f.Message, "queued as device tmp-0042") || !strings.Contains(f.Fix, "edge outbox drop") {
				t.Errorf("doctor's device-identity with a write queued as the removed device:\n%+v", f)
			}
		}
	}
	if !found {
		t.Errorf("doctor says nothing of the device:\n%s", out.String())
	}

	code, flushed, _ := runCLI("edge", "flush")
	if landed("tmpbox write after removal") {
		t.Fatalf("the removed device's queued write was sent under wide-01's token (exit %d):\n%s", code, flushed)
	}
	if code != 1 || !strings.Contains(flushed, "sent 0") || !strings.Contains(flushed, "dead 1") || !strings.Contains(flushed, "sends it as wide-01") || strings.Contains(flushed, "fix the cause") {
		t.Errorf("flush under another device's token: exit %d\n%s", code, flushed)
	}
	_, status, _ := runCLI("edge", "status")
	ops, _ := s.List(context.Background(), 10, outbox.Dead)
	if len(ops) != 1 {
		t.Fatalf("held ops: %+v\n%s", ops, status)
	}
	for _, want := range []string{"DEAD       " + ops[0].Short(), "queued as device tmp-0042; the gateway names this token wide-01: not sent", "`devbox-config edge outbox retry " + ops[0].Short() + "` sends it as wide-01, `drop " + ops[0].Short() + "` gives it up"} {
		if !strings.Contains(status, want) {
			t.Errorf("edge status lacks %q:\n%s", want, status)
		}
	}

	if code, out, errb := runCLI("edge", "outbox", "retry", ops[0].Short()); code != 0 {
		t.Fatalf("retry: exit %d\n%s%s", code, out, errb)
	}
	if code, out, errb := runCLI("edge", "flush"); code != 0 || !landed("tmpbox write after removal") {
		t.Fatalf("retried, it is sent as wide-01: exit %d\n%s%s", code, out, errb)
	}
	if o, _ := s.Get(context.Background(), ops[0].LocalSeq); o.OriginDevice != "wide-01" {
		t.Errorf("the retried op is recorded as %q", o.OriginDevice)
	}
}
