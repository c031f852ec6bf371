package outbox_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// copyOutbox copies a closed outbox's file to dst.
func copyOutbox(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// setMetaRaw writes a meta row of a closed outbox, as a disk clone leaves it.
func setMetaRaw(t *testing.T, path, key, value string) {
	t.Helper()
	db, err := sqlitewal.Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE meta SET value=? WHERE key=?`, value, key); err != nil {
		t.Fatal(err)
	}
}

// A devbox cloned at the disk level (a VM image, a volume snapshot) keeps
// every file's inode, so its outbox cannot be told from the original: the
// same write queued at the same place in both still gets two op ids, so
// the gateway's ledger never answers one machine's write from the other's
// record (attack54 N1: both made one op id, and the second machine's
// diary entry never reached the primary).
func TestADiskClonesOutboxMakesOpIDsOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a := filepath.Join(dir, "a", outbox.FileName)
	if err := os.MkdirAll(filepath.Dir(a), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := outbox.Open(a, "laptop", "lab")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"before the clone"}`)}); err != nil {
		t.Fatal(err)
	}
	identity, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The clone: the same bytes, its identity bound to its own file (as
	// a disk image keeps the inode the identity was made for).
	b := filepath.Join(dir, "b", outbox.FileName)
	copyOutbox(t, a, b)
	c, err := outbox.Open(b, "laptop", "lab") // binds the copy's identity to its file...
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	setMetaRaw(t, b, "identity", identity.Identity) // ...and gives it the original's back

	write := outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"session start"}`)}
	var ops []outbox.Op
	for _, path := range []string{a, b} {
		s, err := outbox.Open(path, "laptop", "lab")
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := s.Stats(ctx); st.Identity != identity.Identity {
			t.Fatalf("%s has identity %s, want the original's %s: not a disk clone", path, st.Identity, identity.Identity)
		}
		op, err := s.Enqueue(ctx, write)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	if ops[0].LocalSeq != ops[1].LocalSeq {
		t.Fatalf("the writes are ops %d and %d: the test needs one position", ops[0].LocalSeq, ops[1].LocalSeq)
	}
	if ops[0].ID == ops[1].ID {
		t.Errorf("the original and its disk clone gave one write the same op id %s", ops[0].ID)
	}
}
