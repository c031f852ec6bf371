package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed"
)

// removedDevice is a gateway (fakepalace behind it, an op-id ledger in
// front) with devices tmp-0042 (shared) and wide-01 (everything), both
// agents agent@tmpbox and agent@wide, and a devbox with tmp-0042's token
// and MEMPALACE_ORIGIN_DEVICE=origin ("": unset) whose edge's outbox is
// s; write queues an add_drawer there, landed says whether one reached
// the primary.
type removedDevice struct {
	s               *outbox.Store
	home            string
	tmpTok, wideTok string
	gw              func(code int, args ...string) (string, string)
	srv             *gateway.Server
	write           func(content string)
	landed          func(content string) bool
	count           func(content string) int
	url             string // the gateway's /mcp
}

func newRemovedDevice(t *testing.T, origin string) *removedDevice {
	primary, up := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "upstream-token"})
	cfg := emptyGatewayConfig(t)
	d := &removedDevice{gw: gatewayCLI(t, cfg), home: t.TempDir()}
	issue := func(id string) string { out, _ := d.gw(0, "token", "issue", id); return strings.TrimSpace(out) }
	d.gw(0, "device", "add", "tmp-0042", "--label", "tmpbox", "--read", "shared", "--write", "shared", "--agents", "agent@tmpbox")
	d.gw(0, "device", "add", "wide-01", "--label", "wide", "--read", "*", "--write", "*", "--agents", "agent@wide")
	d.tmpTok, d.wideTok = issue("tmp-0042"), issue("wide-01")
	l, err := ledger.Open(filepath.Join(t.TempDir(), ledger.FileName), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d.srv = &gateway.Server{ConfigFile: cfg, Upstream: up.URL(), UpstreamToken: func() string { return "upstream-token" }, BindHost: "127.0.0.1",
		Ledger: gateway.OpLedger{L: l, Log: slog.New(slog.DiscardHandler)}}
	if err := d.srv.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.srv.Close() })
	t.Cleanup(watchGateway(d.srv)) // before Close: cleanups run last first
	front := httptest.NewServer(d.srv)
	t.Cleanup(front.Close)
	d.url = front.URL + "/mcp"

	palace := filepath.Join(d.home, "palace")
	for k, v := range map[string]string{"HOME": d.home, "MEMPALACE_PALACE_PATH": palace, "MEMPALACE_REMOTE_URL": front.URL + "/mcp", "MEMPALACE_REMOTE_TOKEN": d.tmpTok,
		"MEMPALACE_EDGE": "1", "MEMPALACE_ORIGIN_DEVICE": origin, "MEMPALACE_ORIGIN_LABEL": "tmpbox", "MEMPALACE_AGENT_NAME": ""} {
		t.Setenv(k, v)
	}
	if d.s, err = openAsEdge(filepath.Join(palace, "edge", outbox.FileName), origin); err != nil { // the device's edge
		t.Fatal(err)
	}
	t.Cleanup(func() { d.s.Close() })
	d.write = func(content string) {
		t.Helper()
		if _, err := d.s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Wing: "shared",
			Payload: []byte(`{"wing":"shared","room":"tmp","content":"` + content + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	d.count = func(content string) (n int) {
		for _, dr := range primary.Dump().Drawers {
			if dr.Content == content {
				n++
			}
		}
		return n
	}
	d.landed = func(content string) bool { return d.count(content) > 0 }
	return d
}

// Outside tester attack44 F3: a device removed at the gateway (lost or
// compromised) keeps queueing writes, refused; the user then puts another
// device's token in .env. `edge flush` sent the queued writes, and they
// landed as the other device's. Now each op records the device the
// gateway named the token when it was queued, and the flusher holds one
// the gateway now names another (dead, other-device, never sent),
// whatever MEMPALACE_ORIGIN_DEVICE says, or with none set: doctor's
// device-identity is an error saying so, `edge status` lists them with
// the fix, and `edge outbox retry` sends one as the new device. (Without
// MEMPALACE_ORIGIN_DEVICE it failed before: the write was sent as
// wide-01.)
func TestARemovedDevicesQueuedWritesAreNotSentUnderTheNextToken(t *testing.T) {
	for _, origin := range []string{"tmp-0042", ""} {
		t.Run("MEMPALACE_ORIGIN_DEVICE="+origin, func(t *testing.T) { removedDevicesWritesHeld(t, origin) })
	}
}

func removedDevicesWritesHeld(t *testing.T, origin string) {
	d := newRemovedDevice(t, origin)
	d.write("tmpbox first write")
	if code, out, errb := runCLI("edge", "flush"); code != 0 || !d.landed("tmpbox first write") {
		t.Fatalf("the device's own write: exit %d\n%s%s", code, out, errb)
	}

	d.gw(0, "device", "remove", "tmp-0042")
	d.write("tmpbox write after removal")
	if code, out, _ := runCLI("edge", "flush"); code != 1 || !strings.Contains(out, "refused the token") {
		t.Fatalf("a removed device's flush: exit %d\n%s", code, out)
	}
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok) // another device's token, MEMPALACE_ORIGIN_DEVICE kept

	var out, errb strings.Builder
	run([]string{"doctor", "--home", d.home, "--json"}, &out, &errb)
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
	if d.landed("tmpbox write after removal") {
		t.Fatalf("the removed device's queued write was sent under wide-01's token (exit %d):\n%s", code, flushed)
	}
	if code != 1 || !strings.Contains(flushed, "sent 0") || !strings.Contains(flushed, "dead 1") || !strings.Contains(flushed, "sends it as wide-01") || strings.Contains(flushed, "fix the cause") {
		t.Errorf("flush under another device's token: exit %d\n%s", code, flushed)
	}
	_, status, _ := runCLI("edge", "status")
	ops, _ := d.s.List(context.Background(), 10, outbox.Dead)
	if len(ops) != 1 {
		t.Fatalf("held ops: %+v\n%s", ops, status)
	}
	for _, want := range []string{"DEAD       " + ops[0].Short(), "queued as device tmp-0042; the gateway names this token wide-01: not sent", "whose it is cannot be told here", "that machine sends it: `devbox-config edge outbox drop " + ops[0].Short() + "`", "`devbox-config edge outbox retry " + ops[0].Short() + "` sends it as wide-01"} {
		if !strings.Contains(status, want) {
			t.Errorf("edge status lacks %q:\n%s", want, status)
		}
	}

	d.write("a write queued once the gateway named the token wide-01")
	if code, out, errb := runCLI("edge", "outbox", "retry", ops[0].Short()); code != 0 {
		t.Fatalf("retry: exit %d\n%s%s", code, out, errb)
	}
	if code, out, errb := runCLI("edge", "flush"); code != 0 || !d.landed("tmpbox write after removal") || !d.landed("a write queued once the gateway named the token wide-01") {
		t.Fatalf("retried, it is sent as wide-01, and so is a write queued as wide-01: exit %d\n%s%s", code, out, errb)
	}
	if o, _ := d.s.Get(context.Background(), ops[0].LocalSeq); o.TokenDevice != "wide-01" {
		t.Errorf("the retried op is recorded as %q", o.TokenDevice)
	}
}

// A devbox whose MEMPALACE_ORIGIN_DEVICE never matched its token's device
// (a typo in .env: doctor warns) has its writes sent: nothing changed
// about which device the token is. (It failed before: every write was
// held, other-device, until retried.)
func TestAnOriginDeviceThatIsNotTheTokensFromTheStartHoldsNothing(t *testing.T) {
	d := newRemovedDevice(t, "tmp-0024")
	d.write("first write")
	d.write("second write")
	if code, out, errb := runCLI("edge", "flush"); code != 0 || !d.landed("first write") || !d.landed("second write") {
		t.Fatalf("writes of a devbox whose .env names another device than its token: exit %d\n%s%s", code, out, errb)
	}
	d.write("a write queued once the gateway was heard")
	if code, out, errb := runCLI("edge", "flush"); code != 0 || !d.landed("a write queued once the gateway was heard") {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
}

// Outside tester attack49 F2: a write held as queued under the removed
// device (the token in .env then another device's), the removed device
// added back under its id (--reuse-removed-id) and its new token put in
// .env: one `edge outbox retry` sends it as that device, the one the
// gateway names the token now. (It failed before: the retry recorded the
// op as wide-01, the device the earlier flush heard, and the next flush
// held it again, "queued as device wide-01".)
func TestARetryOfAHeldWriteSendsItAsTheTokenInEnvNow(t *testing.T) {
	d := newRemovedDevice(t, "")
	d.write("tmpbox first write")
	runCLI("edge", "flush") // the edge hears the gateway name the token tmp-0042
	d.gw(0, "device", "remove", "tmp-0042")
	d.write("tmpbox write after removal")
	runCLI("edge", "flush") // refused: the token is revoked
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok)
	if code, out, _ := runCLI("edge", "flush"); code != 1 || !strings.Contains(out, "sends it as wide-01") {
		t.Fatalf("flush under another device's token: exit %d\n%s", code, out)
	}

	d.gw(0, "device", "add", "tmp-0042", "--label", "tmpbox", "--read", "shared", "--write", "shared", "--reuse-removed-id")
	tok, _ := d.gw(0, "token", "issue", "tmp-0042")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", strings.TrimSpace(tok))
	runCLI("edge", "flush") // the op stays dead: nothing retried it yet
	ops, _ := d.s.List(context.Background(), 10, outbox.Dead)
	if len(ops) != 1 {
		t.Fatalf("held ops: %+v", ops)
	}
	if code, out, errb := runCLI("edge", "outbox", "retry", ops[0].Short()); code != 0 || !strings.Contains(out, "queued to be sent again, as device tmp-0042") {
		t.Fatalf("retry: exit %d\n%s%s", code, out, errb)
	}
	code, out, errb := runCLI("edge", "flush")
	if o, _ := d.s.Get(context.Background(), ops[0].LocalSeq); code != 0 || !d.landed("tmpbox write after removal") || o.TokenDevice != "tmp-0042" {
		t.Fatalf("one retry with tmp-0042's token in .env: exit %d, the op recorded as %q\n%s%s", code, o.TokenDevice, out, errb)
	}
}

// A retry of a held write while the gateway refuses the token in .env
// keeps it held and says why: no device can be told it is sent as.
func TestARetryOfAHeldWriteWithARefusedTokenKeepsItHeld(t *testing.T) {
	d := newRemovedDevice(t, "")
	d.write("tmpbox first write")
	runCLI("edge", "flush") // the edge hears the gateway name the token tmp-0042
	d.gw(0, "device", "remove", "tmp-0042")
	d.write("tmpbox write after removal")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok)
	runCLI("edge", "flush")
	ops, _ := d.s.List(context.Background(), 10, outbox.Dead)
	if len(ops) != 1 {
		t.Fatalf("held ops: %+v", ops)
	}
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.tmpTok) // the removed device's: refused
	code, _, errb := runCLI("edge", "outbox", "retry", ops[0].Short())
	if o, _ := d.s.Get(context.Background(), ops[0].LocalSeq); code != 1 || o.State != outbox.Dead || !strings.Contains(errb, "did not say which device the token in .env is") {
		t.Errorf("retry with a refused token: exit %d, state %s\n%s", code, o.State, errb)
	}
}

// A drop run from another shell while a retry asks the gateway which
// device the token is stays a drop: the retry says the op changed and
// does not queue it again (the reviewer's note: the retry's update took
// the op as it had read it before its network call).
func TestARetryDoesNotUndoADropMadeWhileItAsksTheGateway(t *testing.T) {
	d := newRemovedDevice(t, "")
	d.write("tmpbox first write")
	runCLI("edge", "flush")
	d.gw(0, "device", "remove", "tmp-0042")
	d.write("tmpbox write after removal")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok)
	runCLI("edge", "flush")
	ctx := context.Background()
	ops, _ := d.s.List(ctx, 10, outbox.Dead)
	if len(ops) != 1 {
		t.Fatalf("held ops: %+v", ops)
	}
	_, err := d.s.RetryAs(ctx, ops[0].ID, func(context.Context) (string, error) {
		if _, _, err := d.s.Drop(ctx, ops[0].ID); err != nil { // the operator, in another shell
			t.Fatal(err)
		}
		return "wide-01", nil
	}, false)
	if o, _ := d.s.Get(ctx, ops[0].LocalSeq); err == nil || o.State == outbox.Queued {
		t.Errorf("a retry racing a drop: %v, the op %s", err, o.State)
	}
}

// Outside tester attack76 F7: a devbox copied, and the operator gives the
// original a new device id instead of the copy. The copy, still under the
// old id, sends an op queued before the copy; the original, renamed, holds
// it (queued as the old device), and `edge outbox retry` sends it as the
// new one: filed twice, since the gateway's ledger keyed the op id by the
// device sending it. Now the retried send names the device it was queued
// as and the ledger keys it under that one: filed once, whichever machine
// sends first. (It failed before: two diary entries, each order.)
func TestARetryOnTheRenamedOriginalOfACopyFilesItOnce(t *testing.T) {
	for _, copyFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "copy sends first", false: "original retries first"}[copyFirst], func(t *testing.T) {
			d := newRemovedDevice(t, "")
			d.write("tmpbox first write")
			runCLI("edge", "flush") // the edge hears the gateway name the token tmp-0042
			const entry = "queued on the original before the copy"
			if _, err := d.s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_diary_write", Wing: "shared",
				Payload: []byte(`{"agent_name":"agent","wing":"shared","entry":"` + entry + `"}`)}); err != nil {
				t.Fatal(err)
			}
			ops, _ := d.s.List(context.Background(), 10, outbox.Queued)
			if len(ops) != 1 || ops[0].TokenDevice != "tmp-0042" {
				t.Fatalf("queued: %+v", ops)
			}
			copySends := func() {
				t.Helper()
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
					"name": ops[0].Tool, "arguments": json.RawMessage(ops[0].Payload), "_meta": map[string]any{ledger.MetaKey: ops[0].ID}}})
				if resp, b := testbed.Request(t, "POST", d.url, string(body), map[string]string{"Authorization": "Bearer " + d.tmpTok}); resp.StatusCode != 200 || strings.Contains(b, `"error"`) {
					t.Fatalf("the copy's send as tmp-0042: %d %s", resp.StatusCode, b)
				}
			}
			if copyFirst {
				copySends()
			}
			t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok) // the original renamed
			if code, out, _ := runCLI("edge", "flush"); code != 1 || !strings.Contains(out, "sends it as wide-01") {
				t.Fatalf("the renamed original's flush: exit %d\n%s", code, out)
			}
			if code, out, errb := runCLI("edge", "outbox", "retry", ops[0].Short()); code != 0 {
				t.Fatalf("retry: exit %d\n%s%s", code, out, errb)
			}
			if code, out, errb := runCLI("edge", "flush"); code != 0 {
				t.Fatalf("flush after the retry: exit %d\n%s%s", code, out, errb)
			}
			if !copyFirst {
				copySends()
			}
			if n := d.count(entry); n != 1 {
				t.Errorf("the pre-copy write is on the primary %d times", n)
			}
			if o, _ := d.s.Get(context.Background(), ops[0].LocalSeq); o.State != outbox.Done || o.Error != nil {
				t.Errorf("the retried op: %s %s", o.State, o.Error)
			}
		})
	}
}

// Outside tester attack76 F3: .env switched to another device's id and
// token for a while (a wrong token pasted, then fixed) and back: a write
// made offline under the devbox's own id and token was recorded as
// queued as the device the gateway last named (the other), and held.
// Now the outbox keeps the device the gateway named under each
// MEMPALACE_ORIGIN_DEVICE: a write made under an id the gateway has not
// answered for yet is queued as no device, and sent as the one the
// gateway names its token; one made back under tmp-0042 is queued as
// tmp-0042. (It failed before at the first switch: the write made under
// wide-01's id and token was held, "queued as device tmp-0042".)
func TestAWriteAfterSwitchingEnvBackIsQueuedAsTheDevicesOwn(t *testing.T) {
	d := newRemovedDevice(t, "tmp-0042")
	d.write("tmpbox first write")
	runCLI("edge", "flush") // the gateway names tmp-0042's token tmp-0042
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "wide-01")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok)
	asWide, err := openAsEdge(d.s.Path(), "wide-01") // the edge, its .env switched
	if err != nil {
		t.Fatal(err)
	}
	defer asWide.Close()
	if _, err := asWide.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Wing: "shared", Payload: []byte(`{"wing":"shared","room":"tmp","content":"written as wide-01"}`)}); err != nil {
		t.Fatal(err)
	}
	if code, out, errb := runCLI("edge", "flush"); code != 0 || !d.landed("written as wide-01") { // the gateway names wide-01's token wide-01
		t.Fatalf("flush as wide-01: exit %d\n%s%s", code, out, errb)
	}
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "tmp-0042")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.tmpTok)
	d.write("written as tmp-0042 after switching back") // offline: no gateway answer since
	ops, _ := d.s.List(context.Background(), 10, outbox.Queued)
	if len(ops) != 1 || ops[0].TokenDevice == "wide-01" {
		t.Errorf("the write is recorded as queued as %+v", ops)
	}
	if code, out, errb := runCLI("edge", "flush"); code != 0 || !d.landed("written as tmp-0042 after switching back") {
		t.Errorf("flush back as tmp-0042: exit %d\n%s%s", code, out, errb)
	}
}

// Outside tester attack80 F2: .env switched back to the devbox's own
// token while MEMPALACE_ORIGIN_DEVICE still names the id used meanwhile:
// a write made then is queued as the device the gateway names that token,
// and sent (it was held as the other id's device: the remembered device
// was kept per MEMPALACE_ORIGIN_DEVICE, not per token).
func TestAWriteWithTheOwnTokenUnderAnotherIDIsQueuedAsTheTokensDevice(t *testing.T) {
	d := newRemovedDevice(t, "tmp-0042")
	d.write("tmpbox first write")
	runOK(t, "edge", "flush") // the gateway names tmp-0042's token tmp-0042
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "wide-01")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok)
	s, err := openAsEdge(d.s.Path(), "wide-01")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Wing: "shared", Payload: []byte(`{"wing":"shared","room":"tmp","content":"written as wide-01"}`)}); err != nil {
		t.Fatal(err)
	}
	runOK(t, "edge", "flush")                    // the gateway names wide-01's token wide-01
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.tmpTok) // the token back, the id not yet
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Wing: "shared", Payload: []byte(`{"wing":"shared","room":"tmp","content":"written with tmp-0042's token under wide-01's id"}`)}); err != nil {
		t.Fatal(err)
	}
	if ops, _ := s.List(context.Background(), 10, outbox.Queued); len(ops) != 1 || ops[0].TokenDevice != "tmp-0042" {
		t.Errorf("queued as %+v, want tmp-0042", ops)
	}
	if code, out, errb := runCLI("edge", "flush"); code != 0 || !d.landed("written with tmp-0042's token under wide-01's id") {
		t.Errorf("flush: exit %d\n%s%s", code, out, errb)
	}
}

// openAsEdge opens the outbox at path as the edge does, as device with
// label tmpbox and the token in MEMPALACE_REMOTE_TOKEN when it queues.
func openAsEdge(path, device string) (*outbox.Store, error) {
	return outbox.OpenOptions(path, outbox.Options{Device: device, Label: "tmpbox", Token: func() string { return os.Getenv("MEMPALACE_REMOTE_TOKEN") }})
}
