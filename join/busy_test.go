package join

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// attack30 f10: a join of a palace started while another join of it to
// the same primary runs is refused, naming the one that runs (its pid)
// and what to do; it sends nothing and claims nothing sent. Once that
// join ends, the palace joins.
func TestJoinRefusedWhileAnotherJoinOfThePalaceRuns(t *testing.T) {
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	cfg := config(t, p, pr)
	held, err := outbox.HoldLock(filepath.Join(p.dir, "edge", OutboxFile(Target(cfg.URL))+".lock"))
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
