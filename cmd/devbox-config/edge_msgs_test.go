package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed"
)

// queueOne opens the outbox of a fresh palace (MEMPALACE_PALACE_PATH set
// here) and queues one add_drawer.
func queueOne(t *testing.T) {
	t.Helper()
	palace := filepath.Join(t.TempDir(), "palace")
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Wing: "w"}); err != nil {
		t.Fatal(err)
	}
}

// Outside tester attack73 F2: after a refused token was fixed and the
// next flush sent the op, `edge status` still showed the refusal as its
// "last error" (check MEMPALACE_REMOTE_TOKEN) beside "token accepted".
// Now an error older than the last flush that got through is said to be
// past. (It failed before: the line read as current.)
func TestEdgeStatusSaysALastErrorBeforeASentFlushIsPast(t *testing.T) {
	_, primary := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "right"})
	queueOne(t)
	t.Setenv("MEMPALACE_REMOTE_URL", primary.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "wrong")
	runCLI("edge", "flush")
	_, status, _ := runCLI("edge", "status")
	if !strings.Contains(status, "last error") || strings.Contains(status, "past") {
		t.Fatalf("the refusal is not shown as current:\n%s", status)
	}
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "right")
	if code, out, errs := runCLI("edge", "flush"); code != 0 {
		t.Fatalf("flush with the right token: exit %d\n%s%s", code, out, errs)
	}
	_, status, _ = runCLI("edge", "status")
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, "last error") && !strings.Contains(l, "past: a later send got through") {
			t.Errorf("the fixed token's refusal reads as current: %s\n%s", l, status)
		}
	}
}

// Outside tester attack73 F3: `edge flush` said "the primary refused the
// token: the primary refused the token (401/403): ...", and "1 ops". (It
// failed before.)
func TestEdgeFlushSaysARefusedTokenOnce(t *testing.T) {
	_, primary := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "right"})
	queueOne(t)
	t.Setenv("MEMPALACE_REMOTE_URL", primary.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "wrong")
	_, out, errs := runCLI("edge", "flush")
	if n := strings.Count(out, "refused the token"); n != 2 { // the primary line, and the op's
		t.Errorf("the refusal is said %d times, want once for the primary and once for the op:\n%s", n, out)
	}
	if strings.Contains(errs, "1 ops") {
		t.Errorf("stderr: %s", errs)
	}
}

// Outside tester attack73 F3: behind a gateway whose primary is stopped,
// `edge flush` said "unreachable: not sent: primary unreachable: not
// sent: calling "initialize" ... Service Unavailable", though the gateway
// answered. Now it says the gateway answered and the primary behind it
// failed, with the gateway's words, and "not sent" once. (It failed
// before.)
func TestEdgeFlushSaysTheGatewayAnsweredAndItsPrimaryFailed(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ledger.Advertise(w.Header())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"upstream unreachable: not sent"}}`))
	}))
	defer gw.Close()
	queueOne(t)
	t.Setenv("MEMPALACE_REMOTE_URL", gw.URL+"/mcp")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	_, out, _ := runCLI("edge", "flush")
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "not sent: ") {
			line = strings.TrimPrefix(l, "not sent: ")
		}
	}
	if !strings.Contains(line, "the gateway answered, but the primary behind it failed: upstream unreachable: not sent") || strings.Count(line, "not sent") != 1 || strings.Contains(line, "primary unreachable") {
		t.Errorf("the op's line: %q\n%s", line, out)
	}
}

// Outside tester attack73 F3: `edge flush` gave a dead op's retry/drop
// fix twice when the gateway's refusal named it already. (It failed
// before: "edge outbox retry" twice.)
func TestEdgeFlushGivesADeadOpsFixOnce(t *testing.T) {
	_, said := deadThenTold(t, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"mine"}`)},
		&outbox.RPCError{Code: ledger.CodeChangedOnPrimary, Message: "devbox-config gateway: drawer drawer_w_r_1 changed on the primary since this edit was made (last written by device desk-9b21 at 2026-12-06T16:31:46Z): nothing was written. To overwrite the primary's text with it: devbox-config edge outbox retry <op> (sent without the check); to keep the primary's: devbox-config edge outbox drop <op>, and read the drawer again"})
	if n := strings.Count(said["edge flush"], "outbox retry"); n != 1 {
		t.Errorf("the fix is given %d times:\n%s", n, said["edge flush"])
	}
}
