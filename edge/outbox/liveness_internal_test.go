package outbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const helperEnv = "OUTBOX_LIVENESS_HELPER"

// TestLivenessHelperProcess is the other process of
// TestAKilledProcessIsGoneAtOnce: an edge with a write at its local
// palace and the flush lease, until it is killed.
func TestLivenessHelperProcess(t *testing.T) {
	t.Parallel()
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("the other process of TestAKilledProcessIsGoneAtOnce")
	}
	s, err := Open(path, "dev", "other")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Intent: true}); err != nil {
		t.Fatal(err)
	}
	f := &Flusher{S: s, P: &countingSender{}}
	f.defaults()
	if ok, err := f.acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	fmt.Println("holding")
	time.Sleep(time.Minute) // killed before
}

// An edge (or `edge flush`) killed with SIGKILL mid-write and mid-flush:
// while it runs, another process leaves its write and its lease alone;
// once it is dead, the next takes its lease at once (not when it expires,
// 23 s on) and resolves its write.
func TestAKilledProcessIsGoneAtOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLivenessHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "holding" {
	}
	s, err := Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if n, err := s.ResolveIntents(ctx); n != 0 || err != nil {
		t.Errorf("resolved %d (%v) of a live process's intents, want none", n, err)
	}
	f := &Flusher{S: s, P: &countingSender{}}
	f.defaults()
	if ok, _ := f.acquire(ctx); ok {
		t.Error("the lease of a live flusher was taken")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if ok, err := f.acquire(ctx); !ok || err != nil {
		t.Errorf("the lease of a killed flusher is not taken at once (%v): `edge flush` is refused until it expires", err)
	} else if tok := f.mine().Token; tok != 2 {
		t.Errorf("token %d after a killed holder's lease was taken, want 2", tok)
	}
	if n, err := s.ResolveIntents(ctx); n != 1 || err != nil {
		t.Errorf("resolved %d (%v) of a killed process's intents, want 1", n, err)
	}
	if es, _ := os.ReadDir(filepath.Join(filepath.Dir(path), liveDir)); len(es) != 1 || es[0].Name() != s.owner {
		t.Errorf("lock files left: %v, want this process's alone (%s): the killed one's is removed", es, s.owner)
	}
}

// An outbox an older build made is migrated (ops gain their owner), and
// the intents it holds name no owner: they are resolved as a killed
// edge's, as that build did, even while an edge of it may still run.
func TestAnOlderBuildsIntentsAreResolvedAsBefore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	old, err := Open(path, "dev", "old")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close() // its lock held throughout: alive, but named nowhere
	ctx := context.Background()
	if _, err := old.Enqueue(ctx, Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Intent: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.db.ExecContext(ctx, `ALTER TABLE ops DROP COLUMN owner; PRAGMA user_version = 0`); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.ResolveIntents(ctx); n != 1 || err != nil {
		t.Errorf("resolved %d (%v) of an older build's intents, want 1", n, err)
	}
}
