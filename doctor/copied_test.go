package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// Doctor over a copied outbox (a HOME copied to start a second machine)
// leaves the file as it found it: before, its open gave the copy a new
// identity, rewriting the file, though doctor is read-only (attack55 F6).
// The copy is of an edge still running (or killed), so the queued writes
// are in its -wal only: doctor counts them, and leaves the file and the
// -wal byte for byte (before, closing its open checkpointed the -wal into
// the file, 4096 → 61440 bytes, and deleted the -wal).
func TestDoctorLeavesACopiedOutboxUnchanged(t *testing.T) {
	b := newBox(t)
	orig := filepath.Join(t.TempDir(), outbox.FileName)
	s, err := outbox.Open(orig, "laptop", "lab")
	must(t, err)
	defer s.Close()
	for _, room := range []string{"a", "b", "c", "d", "e"} {
		_, err = s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"` + room + `","content":"queued"}`), Wing: "w"})
		must(t, err)
	}
	copied := map[string]string{}
	for _, suffix := range []string{"", "-wal"} { // while it is open: what a killed edge leaves
		data, err := os.ReadFile(orig + suffix)
		must(t, err)
		copied[suffix] = string(data)
		write(t, OutboxPath(b.palace)+suffix, string(data), 0o600) // another inode: a copy
	}
	if copied["-wal"] == "" {
		t.Fatal("the copy's -wal is empty: the test needs the writes in it")
	}
	b.opts.Now = func() time.Time { return time.Now().Add(48 * time.Hour) }
	fs := b.run()
	only(t, fs, "warn:outbox-backlog")
	if !strings.Contains(fs[0].Message, "5 write(s) wait") {
		t.Errorf("doctor did not count the writes in the -wal: %s", fs[0].Message)
	}
	for suffix, data := range copied {
		after, err := os.ReadFile(OutboxPath(b.palace) + suffix)
		if err != nil || string(after) != data {
			t.Errorf("doctor changed the copied outbox%s: %d bytes, were %d (%v)", suffix, len(after), len(data), err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(OutboxPath(b.palace)), "live")); err == nil {
		t.Error("doctor made the edge's liveness directory beside the outbox")
	}
}

// Doctor says an outbox is a copy while .env's device id is the one its
// ops were made under, before any edge re-keyed it and after (attack54
// N2: a copied HOME wrote under the first machine's name, unsaid).
func TestDoctorSaysTheOutboxIsACopy(t *testing.T) {
	b := newBox(t)
	copyOutbox(t, b, outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"e"}`)})
	b.env["MEMPALACE_ORIGIN_DEVICE"] = "laptop"
	run := func() []Finding { // solitary: the copy's queued write is a note of its own
		return slices.DeleteFunc(b.run(), func(f Finding) bool { return f.ID == IDOutboxBacklog })
	}
	fs := run()
	only(t, fs, "info:outbox-copied")
	if !strings.Contains(fs[0].Message, `device "laptop"`) || !strings.Contains(fs[0].Message, "no edge has opened it") || !strings.Contains(fs[0].Fix, "token issue NEW-ID") {
		t.Fatalf("%+v", fs[0])
	}
	s, err := outbox.Open(OutboxPath(b.palace), "laptop", "lab") // an edge: re-keys it, and keeps the record
	must(t, err)
	must(t, s.Close())
	if fs = run(); len(fs) != 1 || !strings.Contains(fs[0].Message, "first opened as a copy") {
		t.Fatalf("after an edge opened it: %+v", fs)
	}
	b.env["MEMPALACE_ORIGIN_DEVICE"] = "laptop-2"
	only(t, run())
}

// A copy made on the same machine (a backup restored, a devbox moved to a
// new disk) is dismissed by `edge outbox same-machine`, which the fix
// names: before, the note stayed for good while the device id was the
// same (attack57 A3), and operators learnt to ignore it.
func TestDoctorsCopyNoteIsDismissedForTheSameMachine(t *testing.T) {
	b := newBox(t)
	copyOutbox(t, b)
	b.env["MEMPALACE_ORIGIN_DEVICE"] = "laptop"
	s, err := outbox.Open(OutboxPath(b.palace), "laptop", "lab") // an edge: re-keys it, and keeps the record
	must(t, err)
	fs := b.run()
	only(t, fs, "info:outbox-copied")
	if !strings.Contains(fs[0].Fix, "same machine (a backup restored, a devbox moved to a new disk), nothing is wrong: `devbox-config edge outbox same-machine`") {
		t.Errorf("the fix names no way to dismiss it: %s", fs[0].Fix)
	}
	c, err := s.SameMachine(context.Background())
	must(t, err)
	if c.Device != "laptop" {
		t.Errorf("removed %+v", c)
	}
	only(t, b.run())
	if _, err := s.SameMachine(context.Background()); !errors.Is(err, outbox.ErrNoCopy) {
		t.Errorf("a second same-machine: %v, want ErrNoCopy", err)
	}
	must(t, s.Close())
}

// An outbox an older build left (after an upgrade, before this build's
// edge ran) is an info that the next edge command migrates it, doctor
// exiting 0, and the file as it was: before, doctor's read-only look
// called it outbox-dead, an error, whose fix said nothing of the upgrade
// (found on the attack56 fleet's 020e7db outbox).
func TestDoctorTellsAnOlderOutboxFromADeadOne(t *testing.T) {
	b := newBox(t)
	path := outboxAtVersion(t, b, 2)
	before, err := os.ReadFile(path)
	must(t, err)
	fs := b.run()
	only(t, fs, "info:outbox-older")
	if !strings.Contains(fs[0].Fix, "devbox-config edge status") {
		t.Fatalf("%+v", fs[0])
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("doctor changed the older outbox")
	}
}

// An outbox a newer release set up (a rollback) is an error that says so
// and keeps the file, never the move-aside fix that loses its writes,
// under an id of its own: outbox-dead means dead writes, whose fix is
// retry or drop (attack83 F4: it was outbox-dead).
func TestDoctorNeverMovesANewerOutboxAside(t *testing.T) {
	b := newBox(t)
	path := outboxAtVersion(t, b, 99)
	before, err := os.ReadFile(path)
	must(t, err)
	fs := b.run()
	only(t, fs, "error:outbox-newer")
	if !strings.Contains(fs[0].Message, "newer devbox-config") || strings.Contains(fs[0].Fix, "aside") || !strings.Contains(fs[0].Fix, "keep the file") {
		t.Fatalf("%+v", fs[0])
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("doctor changed the newer outbox")
	}
}

// outboxAtVersion is b's outbox, made with its schema version set to v, as
// an older (or newer) release would have left it.
func outboxAtVersion(t *testing.T, b *box, v int) string {
	t.Helper()
	path := OutboxPath(b.palace)
	must(t, os.MkdirAll(filepath.Dir(path), 0o700))
	s, err := outbox.Open(path, "laptop", "lab")
	must(t, err)
	must(t, s.Close())
	db, err := sqlitewal.Open(path, "FULL")
	must(t, err)
	_, err = db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v))
	must(t, err)
	must(t, db.Close())
	return path
}

// While the outbox will not open, the writes an edge counted as staying
// local meanwhile are told beside it, with the join that sends them:
// before, only outbox-dead was, until the outbox opened (attack59 B2).
func TestDoctorTellsWritesCountedWhileTheOutboxWouldNotOpen(t *testing.T) {
	b := newBox(t)
	path := outboxAtVersion(t, b, 99)
	must(t, outbox.NoteStayedLocal(path, outbox.StayedLocal{N: 3, Since: time.Now(), Last: time.Now(), Primary: "http://primary.example/mcp"}))
	fs := b.run()
	only(t, fs, "error:outbox-newer", "warn:outbox-stayed-local")
	if !strings.Contains(fs[1].Message, "3 write(s)") || !strings.Contains(fs[1].Fix, "devbox-config join") {
		t.Fatalf("%+v", fs[1])
	}
	// Worded for every cause, not a full disk's alone: here the outbox is
	// a newer devbox-config's (attack106 F2).
	if !strings.Contains(fs[1].Fix, "a newer devbox-config") || strings.HasPrefix(fs[1].Fix, "free space") {
		t.Errorf("the fix blames a full disk: %s", fs[1].Fix)
	}
}

// copyOutbox copies an outbox made under device "laptop", holding ws
// queued (none: an idle one, its done ops pruned), into b's palace: a
// copied HOME.
func copyOutbox(t *testing.T, b *box, ws ...outbox.Write) {
	t.Helper()
	orig := filepath.Join(t.TempDir(), outbox.FileName)
	s, err := outbox.Open(orig, "laptop", "lab")
	must(t, err)
	for _, w := range ws {
		_, err = s.Enqueue(context.Background(), w)
		must(t, err)
	}
	must(t, s.Close())
	data, err := os.ReadFile(orig)
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(OutboxPath(b.palace)), 0o700))
	write(t, OutboxPath(b.palace), string(data), 0o600)
}

// Doctor notes an idle outbox's copy while .env's device is still the
// one it was made under (before, the note took doctor's own device, "",
// and never matched).
func TestDoctorNotesAnIdleOutboxsCopy(t *testing.T) {
	b := newBox(t)
	copyOutbox(t, b)
	b.env["MEMPALACE_ORIGIN_DEVICE"] = "laptop"
	run := func() []Finding { // solitary: the copy's queued write is a note of its own
		return slices.DeleteFunc(b.run(), func(f Finding) bool { return f.ID == IDOutboxBacklog })
	}
	fs := run()
	only(t, fs, "info:outbox-copied")
	if !strings.Contains(fs[0].Message, `device "laptop"`) {
		t.Fatalf("%+v", fs[0])
	}
}

// An edge that opens an idle outbox's copy once the operator gave this
// machine a new device id, as the note advises, records the copy under
// the old one, so doctor says nothing more. Before, the record took the
// opener's device, the new id: the note said the machine wrote under it
// and asked for a new id again.
func TestAnIdleOutboxsCopyOpenedUnderANewDeviceIsSettled(t *testing.T) {
	b := newBox(t)
	copyOutbox(t, b)
	b.env["MEMPALACE_ORIGIN_DEVICE"] = "laptop-2"
	s, err := outbox.Open(OutboxPath(b.palace), "laptop-2", "lab")
	must(t, err)
	st, err := s.Stats(context.Background())
	must(t, err)
	must(t, s.Close())
	if st.Copied == nil || st.Copied.Device != "laptop" {
		t.Errorf("the copy is recorded as %+v, want made under laptop", st.Copied)
	}
	only(t, b.run())
}
