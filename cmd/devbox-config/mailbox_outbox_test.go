package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// `devbox-config mailbox` on a devbox counts the agent's reply still
// queued in that devbox's outbox as the edge does: the ask it answers is
// not owed, so a hook does not tell the agent to answer it again (a
// second ack once the outbox flushes). It reads the outbox without
// writing to it, and a palace without one is left without one. Before,
// it read the primary alone and listed the ask "no reply of yours joins
// it yet" (attack93 F1).
func TestMailboxCountsTheReplyQueuedInTheOutbox(t *testing.T) {
	pl, srv := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{})
	for _, k := range []string{"MEMPALACE_AGENT_NAME", "MEMPALACE_EDGE", "MEMPALACE_REMOTE_TOKEN"} {
		t.Setenv(k, "")
	}
	palace := filepath.Join(t.TempDir(), "palace")
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", srv.URL())
	t.Setenv("MEMPALACE_EDGE_HARNESS", "claude")
	t.Setenv("MEMPALACE_ORIGIN_LABEL", "alice")
	ask := logEvent(t, pl, "mempalace_event_append", map[string]any{"type": "task.request", "stream": "devbox", "room": "general", "from_agent": "pi@bob", "to_agent": "claude@alice", "correlation_id": "rev-2", "status": "open", "body": "rebase on main"})
	other := logEvent(t, pl, "mempalace_event_append", map[string]any{"type": "task.request", "stream": "devbox", "room": "general", "from_agent": "pi@bob", "to_agent": "claude@alice", "status": "open", "body": "still owed"})
	mailboxOut := func() string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run([]string{"mailbox"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
		}
		return out.String()
	}

	// no outbox: both owed, and none made
	if out := mailboxOut(); !strings.Contains(out, ask) || !strings.Contains(out, other) {
		t.Fatalf("no outbox: %s", out)
	}
	if _, err := os.Stat(filepath.Join(palace, "edge")); !os.IsNotExist(err) {
		t.Fatalf("the mailbox made %s (%v)", filepath.Join(palace, "edge"), err)
	}

	path := filepath.Join(palace, "edge", outbox.FileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.Open(path, "alice-0001", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Enqueue(context.Background(), outbox.Write{Name: "mempalace_event_ack", Payload: []byte(`{"event_id":"` + ask + `","from_agent":"claude@alice","status":"applied","body":"rebased"}`)}); err != nil {
		t.Fatal(err)
	}
	ob.Close()
	before, _ := os.ReadFile(path)

	out := mailboxOut()
	if strings.Contains(out, ask) || !strings.Contains(out, other) || !strings.Contains(out, "1 item is owed") {
		t.Errorf("with the reply queued in the outbox, the mailbox says\n%s", out)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the mailbox wrote to the outbox")
	}
}
