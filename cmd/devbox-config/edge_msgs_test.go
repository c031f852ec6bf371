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
