package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed"
)

// A hung primary (kill -STOP on serve or the gateway) is when the operator
// most needs `edge status`: it must still report the outbox (its queue,
// its tombstones) and say the primary did not answer, within the edge's
// call timeout, and exit 0. Before, the primary's check used up the
// command's one 10 s budget whatever MEMPALACE_EDGE_TIMEOUT said, and the
// outbox's own read of its tombstones then failed: the command printed
// one line, "outbox tombstones: context deadline exceeded", and exited 1
// (outside tester, attack8 05).
func TestEdgeStatusWithAHungPrimary(t *testing.T) {
	s := edgeOutbox(t)
	t.Setenv("MEMPALACE_REMOTE_URL", testbed.HungPrimary(t))
	t.Setenv("MEMPALACE_EDGE_TIMEOUT", "1s")
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Wing: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTombstones(ctx, []outbox.Tombstone{{Kind: outbox.TombDrawer, Key: "drawer_w_r_1"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	began := time.Now()
	out := runOK(t, "edge", "status")
	// It says what the silence is, with doctor's fix (it said "unreachable:
	// context deadline exceeded": outside tester, attack36 N4).
	for _, want := range []string{"queued 1", "primary    unreachable: no answer within 1s (fix: check that the primary runs", "deleted    1 record"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if took := time.Since(began); took > 4500*time.Millisecond {
		t.Errorf("status took %v with a 1 s call timeout", took)
	}
}

// `edge flush --timeout 1s` with a hung primary gives up at its timeout
// and says what is left, the primary's state included, within about a
// second more, whatever the edge's call timeout (10 s by default). Before,
// the report's check of the primary took 10 s more (outside tester,
// attack8 04: 1 s -> 11 s), then 5 s more, and the send itself outlived
// the timeout (attack10: 1 s -> 9 s).
func TestEdgeFlushWithAHungPrimaryKeepsItsTimeout(t *testing.T) {
	testbed.Integration(t, "waits out a 3 s timeout against a hung primary")
	s := edgeOutbox(t)
	t.Setenv("MEMPALACE_REMOTE_URL", testbed.HungPrimary(t))
	// the default call timeout (10 s): --timeout alone bounds the flush
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Wing: "w"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	began := time.Now()
	code, out, errOut := runCLI("edge", "flush", "--timeout", "1s")
	if code == 0 || !strings.Contains(out, "primary: unreachable") || !strings.Contains(out, "not sent:") {
		t.Errorf("flush: exit %d\n%s%s", code, out, errOut)
	}
	if took := time.Since(began); took > 4*time.Second {
		t.Errorf("flush --timeout 1s took %v\n%s%s", took, out, errOut)
	}
}

// `devbox-config mailbox --timeout 3s` against a hung primary gives up at
// its timeout. Before, the MCP SDK's notice that the initialize was given
// up was sent to the hung primary too, and waited on up to the timeout
// (or 5 s) more (outside tester, attack10: 2 s took 4 s, 10 s took 15 s).
func TestMailboxWithAHungPrimaryKeepsItsTimeout(t *testing.T) {
	testbed.Integration(t, "waits out a 3 s timeout against a hung primary")
	t.Setenv("MEMPALACE_REMOTE_URL", testbed.HungPrimary(t))
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	t.Setenv("MEMPALACE_EDGE_HARNESS", "opencode")
	t.Setenv("MEMPALACE_ORIGIN_LABEL", "box")
	began := time.Now()
	code, out, errOut := runCLI("mailbox", "--timeout", "3s")
	// It says what the silence is, with doctor's fix, from its own wait (it
	// said "context deadline exceeded" and no fix: attack36 N4).
	if code == 0 || !strings.Contains(errOut, "cannot read the primary at "+os.Getenv("MEMPALACE_REMOTE_URL")+": no answer within 3s") ||
		!strings.Contains(errOut, "fix: check that the primary runs") || !strings.Contains(errOut, "`devbox-config mailbox --timeout 12s` gives it longer") {
		t.Errorf("mailbox with a hung primary: exit %d\n%s%s", code, out, errOut)
	}
	if took := time.Since(began); took > 4500*time.Millisecond {
		t.Errorf("mailbox --timeout 3s took %v\n%s%s", took, out, errOut)
	}
}

// `edge flush --timeout 0s` is a usage error, said as such, as for the
// mailbox's --timeout. Before, it failed at once on "resolving the writes
// a stopped edge left unsettled: context deadline exceeded" (attack11).
func TestEdgeFlushRefusesANonPositiveTimeout(t *testing.T) {
	s := edgeOutbox(t)
	s.Close()
	for _, d := range []string{"0s", "-1s"} {
		if code, out, errOut := runCLI("edge", "flush", "--timeout", d); code != 2 || !strings.Contains(errOut, "--timeout must be positive") {
			t.Errorf("flush --timeout %s: exit %d\n%s%s", d, code, out, errOut)
		}
	}
}
