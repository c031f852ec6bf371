package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// Outside tester attack49 F6: `edge status` showed the last error of a
// send to the URL .env named before (the gateway moved) beside the
// current primary's state. Now a last error is shown only while
// MEMPALACE_REMOTE_URL is the URL it came from. (It failed before: the
// old URL's refusal stayed "last error".)
func TestEdgeStatusShowsNoLastErrorOfAnEarlierURL(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	_, old := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "old-token"})
	_, moved := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "new-token"})
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", old.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "new-token") // the old primary refuses it
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Wing: "w"}); err != nil {
		t.Fatal(err)
	}
	runCLI("edge", "flush")
	if _, status, _ := runCLI("edge", "status"); !strings.Contains(status, "last error") {
		t.Fatalf("the refusal of the URL in .env is not shown:\n%s", status)
	}

	t.Setenv("MEMPALACE_REMOTE_URL", moved.URL())
	if _, status, _ := runCLI("edge", "status"); strings.Contains(status, "last error") {
		t.Errorf("the earlier URL's error is shown as the primary's:\n%s", status)
	}
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "old-token") // the moved primary refuses it
	runCLI("edge", "flush")
	if _, status, _ := runCLI("edge", "status"); !strings.Contains(status, "last error") {
		t.Errorf("the moved primary's refusal is not shown:\n%s", status)
	}
}

// Writes queued for one primary, flushed with MEMPALACE_REMOTE_URL naming
// another: `edge status` names the one they were queued for, and `edge
// flush` sends them (a palace moved to a new primary) saying on stderr
// which primary they were queued for. Nothing named it, and the flush
// sent them silently (attack90 F2).
func TestEdgeFlushToAnotherPrimaryNamesTheOneQueuedFor(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	moved, primary := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok-0123456789"})
	const old = "http://127.0.0.1:21899/mcp"
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", primary.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok-0123456789")
	s, err := outbox.OpenOptions(filepath.Join(palace, "edge", outbox.FileName), outbox.Options{Device: "dev", Label: "lab", Primary: old})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"queued for the old primary"}`), Wing: "w"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, status, _ := runCLI("edge", "status"); !strings.Contains(status, "queued for "+old+" (not the primary MEMPALACE_REMOTE_URL names now") {
		t.Errorf("status does not name the primary the writes were queued for:\n%s", status)
	}
	code, out, errOut := runCLI("edge", "flush")
	if code != 0 || !strings.Contains(out, "sent 1") || len(moved.Dump().Drawers) != 1 {
		t.Fatalf("flush to the new primary: exit %d, %s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "were queued for the primary "+old+"; sending them to "+primary.URL()) {
		t.Errorf("flush did not say which primary the writes were queued for:\n%s", errOut)
	}
}
