package join

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// attack30 f10: a join of a palace started while another join of it to
// the same primary runs is refused, naming the one that runs (its pid)
// and what to do; it sends nothing and claims nothing sent. Once that
// join ends, the palace joins.
func TestJoinRefusedWhileAnotherJoinOfThePalaceRuns(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	cfg := config(t, p, pr)
	held, err := outbox.HoldLock(filepath.Join(p.dir, "edge", "join.lock"))
	if err != nil {
		t.Fatal(err)
	}
	held.WriteString("4242\n")
	rep, err := Run(context.Background(), cfg, Options{})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "another join") || !strings.Contains(err.Error(), "pid 4242") || rep.Calls["primary add_drawer"] != 0 {
		t.Fatalf("a join while another runs: err %v, calls %v", err, rep.Calls)
	}
	held.Close()
	if rep := run(t, cfg, Options{}); !rep.OK() || rep.Sent[Drawers] == 0 {
		t.Fatalf("a join after the other ended: sent %v, failed %+v", rep.Sent, rep.Failed)
	}
}

// attack33 g4: the same palace joined at once through two URLs of one
// primary (a LAN address and a tunnel) ran both joins, each sending every
// record: the primary held them twice. The second is refused while the
// first runs, naming it, whatever the URL; nothing lands twice.
func TestJoinRefusedWhileAJoinOfThePalaceRunsThroughAnotherURL(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	for i := range 4 {
		p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("two urls note %d", i)})
	}
	p.save(t)
	first := config(t, p, pr)
	second := first
	second.URL = strings.Replace(first.URL, "127.0.0.1", "localhost", 1)
	if second.URL == first.URL {
		t.Fatalf("no second URL for %s", first.URL)
	}
	pr.pl.SetLatency("mempalace_add_drawer", 200*time.Millisecond)
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), first, Options{}); done <- err }()
	for pr.pl.Calls("mempalace_add_drawer") < 1 {
		time.Sleep(5 * time.Millisecond)
	}
	rep, err := Run(context.Background(), second, Options{})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "another join") || !strings.Contains(err.Error(), Target(first.URL)) || rep.Calls["primary add_drawer"] != 0 {
		t.Fatalf("a join through another URL while one runs: err %v, calls %v", err, rep.Calls)
	}
	if n := len(pr.pl.Dump().Drawers); n != 4 {
		t.Fatalf("the primary holds %d drawers, want 4", n)
	}
}

// A join.lock that is a symlink (planted by whoever may write the palace's
// edge directory) is not followed: the join is refused, naming the lock,
// and the file it points at is left as it was. The join truncated that
// file and wrote its pid and target into it.
func TestJoinDoesNotWriteThroughAJoinLockSymlink(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(p.dir, "edge"), 0o700)
	if err := os.Symlink(victim, filepath.Join(p.dir, "edge", "join.lock")); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), config(t, p, pr), Options{})
	var ue *UsageError
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" || !errors.As(err, &ue) || !strings.Contains(err.Error(), "join.lock") || rep.Calls["primary add_drawer"] != 0 {
		t.Fatalf("a join with join.lock a symlink: err %v, calls %v; the file it points at holds %q", err, rep.Calls, b)
	}
}
