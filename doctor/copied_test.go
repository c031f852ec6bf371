package doctor

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Doctor over a copied outbox (a HOME copied to start a second machine)
// leaves the file as it found it: before, its open gave the copy a new
// identity, rewriting the file, though doctor is read-only (attack55 F6).
func TestDoctorLeavesACopiedOutboxUnchanged(t *testing.T) {
	b := newBox(t)
	orig := filepath.Join(t.TempDir(), outbox.FileName)
	s, err := outbox.Open(orig, "laptop", "lab")
	must(t, err)
	_, err = s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"queued"}`), Wing: "w"})
	must(t, err)
	must(t, s.Close())
	data, err := os.ReadFile(orig)
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(OutboxPath(b.palace)), 0o700))
	write(t, OutboxPath(b.palace), string(data), 0o600) // another inode: a copy
	b.run()
	after, err := os.ReadFile(OutboxPath(b.palace))
	must(t, err)
	if string(after) != string(data) {
		t.Fatal("doctor rewrote the copied outbox")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(OutboxPath(b.palace)), "live")); err == nil {
		t.Error("doctor made the edge's liveness directory beside the outbox")
	}
}
