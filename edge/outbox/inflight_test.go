package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// heldPrimary holds its first call of tool until answer says how it ends
// (lost: the connection drops after the request left; else the palace's
// answer); every other call, and every later one of tool, goes to the
// palace at once. adds counts the calls of tool.
type heldPrimary struct {
	tool   string
	mem    memPrimary
	called chan struct{}
	answer chan bool // true: lost
	adds   *atomic.Int32
}

func (p heldPrimary) Up() bool { return true }

func (p heldPrimary) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	if tool != p.tool || p.adds.Add(1) > 1 {
		return p.mem.Call(ctx, tool, args)
	}
	close(p.called)
	select {
	case lost := <-p.answer:
		if lost {
			return nil, errors.New("connection reset by peer after the request was sent")
		}
		return p.mem.Call(ctx, tool, args)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// settledInFlight queues a write in one process's outbox, has its flusher
// (Drain, which sends a lost answer's op again) send it, and while the
// send is in flight runs operator on a second Store on the same file (the
// CLI, another process); then the send ends (lost, or landed). It returns
// the op as the outbox holds it after, the add_drawer calls the primary
// got, and operator's error.
func settledInFlight(t *testing.T, lost bool, operator func(*outbox.Store, string) error) (outbox.Op, int32, error) {
	t.Helper()
	return settledInFlightOf(t, inFlight{write: outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"a write the operator does not want on the primary"}`)}}, lost, operator)
}

// inFlight is the write settledInFlightOf queues, and what it does
// before the send (setUp: with the primary's palace and the op queued)
// and after it (check: with the outbox).
type inFlight struct {
	write outbox.Write
	setUp func(*fakepalace.Palace, *outbox.Store, outbox.Op)
	check func(*outbox.Store)
}

// settledInFlightOf is settledInFlight of c's write.
func settledInFlightOf(t *testing.T, c inFlight, lost bool, operator func(*outbox.Store, string) error) (outbox.Op, int32, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	edge, err := outbox.Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer edge.Close()
	cli, err := outbox.Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	op, err := edge.Enqueue(ctx, c.write)
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := fakepalace.New(fakepalace.Options{})
	if c.setUp != nil {
		c.setUp(pl, edge, op)
	}
	p := heldPrimary{tool: c.write.Name, mem: memPrimary{pl}, called: make(chan struct{}), answer: make(chan bool, 1), adds: new(atomic.Int32)}
	drained := make(chan error, 1)
	go func() {
		_, err := (&outbox.Flusher{S: edge, P: p, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}).Drain(ctx)
		drained <- err
	}()
	select {
	case <-p.called:
	case <-time.After(20 * time.Second):
		t.Fatal("the flusher never sent the write")
	}
	opErr := operator(cli, op.ID)
	p.answer <- lost
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	got, err := cli.GetByID(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.check != nil {
		c.check(cli)
	}
	return got, p.adds.Load(), opErr
}

func drop(s *outbox.Store, id string) error {
	_, _, err := s.Drop(context.Background(), id)
	return err
}

// An operator's drop of an op a running edge has in flight sticks: the
// flusher's record of its attempt (answer lost: queued again) is not made
// over it, and the op is never sent again. Before, the record undid the
// drop and the op was sent again until it landed (outside tester,
// attack84 F2), its "dropped by the operator" note gone.
func TestADropWhileInFlightStaysDroppedWhenTheAnswerIsLost(t *testing.T) {
	t.Parallel()
	got, adds, err := settledInFlight(t, true, drop)
	if err != nil {
		t.Fatalf("the drop of an op in flight: %v", err)
	}
	f := outbox.FailureOf(got.Error)
	if got.State != outbox.Done || f.Kind != outbox.Dropped {
		t.Errorf("the op dropped in flight is %s (%s), want done, dropped", got.State, got.Error)
	}
	if !strings.HasSuffix(f.Message, outbox.InFlightAtSettle) {
		t.Errorf("the drop's note %q does not say the op was in flight and may have landed", f.Message)
	}
	if adds != 1 {
		t.Errorf("the primary got the dropped write %d times, want only the send in flight at the drop", adds)
	}
}

// An answer that arrives after the drop (the send landed) keeps the op
// dropped, never sent again, and notes that it landed, with the
// primary's answer: `edge outbox list --all` tells the operator it is
// there to delete.
func TestADropWhileInFlightNotesTheSendThatLanded(t *testing.T) {
	t.Parallel()
	got, adds, err := settledInFlight(t, false, drop)
	if err != nil {
		t.Fatalf("the drop of an op in flight: %v", err)
	}
	f := outbox.FailureOf(got.Error)
	if got.State != outbox.Done || f.Kind != outbox.Dropped {
		t.Errorf("the op dropped in flight is %s (%s), want done, dropped", got.State, got.Error)
	}
	if !strings.HasSuffix(f.Message, outbox.Landed) || len(got.Result) == 0 {
		t.Errorf("the dropped op whose send landed says %q (answer %s), want it noted as landed, with the answer", f.Message, got.Result)
	}
	if adds != 1 {
		t.Errorf("the primary got the dropped write %d times, want 1", adds)
	}
}

// delivered of an op in flight stands too: a lost answer does not queue
// it again.
func TestDeliveredWhileInFlightIsNotSentAgain(t *testing.T) {
	t.Parallel()
	got, adds, err := settledInFlight(t, true, func(s *outbox.Store, id string) error {
		_, err := s.Delivered(context.Background(), id)
		return err
	})
	if err != nil {
		t.Fatalf("delivered of an op in flight: %v", err)
	}
	if f := outbox.FailureOf(got.Error); got.State != outbox.Done || f.Kind != outbox.Delivered {
		t.Errorf("the op recorded as delivered in flight is %s (%s), want done, delivered", got.State, got.Error)
	}
	if adds != 1 {
		t.Errorf("the primary got the op recorded as delivered %d times, want 1", adds)
	}
}

// retry of an op in flight is refused (its answer settles it): before, it
// reset the op to queued under the flusher, which sent it again
// regardless of that answer.
func TestRetryOfAnOpInFlightIsRefused(t *testing.T) {
	t.Parallel()
	got, adds, err := settledInFlight(t, false, func(s *outbox.Store, id string) error {
		_, err := s.Retry(context.Background(), id)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Errorf("retry of an op in flight: %v, want it refused as in flight", err)
	}
	if got.State != outbox.Done || len(got.Error) != 0 || adds != 1 {
		t.Errorf("the op is %s (%s) after %d sends, want done by its one send", got.State, got.Error, adds)
	}
}

// deleteInFlight is a delete of a drawer with its tombstone, the drawer
// on the primary if there.
func deleteInFlight(t *testing.T, there bool, check func(*outbox.Store)) inFlight {
	id := catalogue.DrawerID("w", "r", "the drawer the delete removes")
	return inFlight{
		write: outbox.Write{Name: "mempalace_delete_drawer", Payload: []byte(`{"drawer_id":"` + id + `"}`)},
		setUp: func(pl *fakepalace.Palace, s *outbox.Store, op outbox.Op) {
			ctx := context.Background()
			if there {
				if res, err := (memPrimary{pl}).Call(ctx, "mempalace_add_drawer", []byte(`{"wing":"w","room":"r","content":"the drawer the delete removes"}`)); err != nil || res["drawer_id"] != id {
					t.Fatalf("the drawer on the primary: %v %v, want %s", res, err, id)
				}
			}
			if err := s.TombstonesSent(ctx, []outbox.Tombstone{{Kind: outbox.TombDrawer, Key: id}}, op.ID); err != nil {
				t.Fatal(err)
			}
		},
		check: check,
	}
}

// Reviewer 27 D3: a dropped delete whose send in flight landed is noted
// as landed, and what follows a delete the primary took follows it too:
// its tombstone goes (the primary's copy is gone) and last_flush says a
// send got through. (It failed before: the tombstone and an unset
// last_flush stayed as if the delete had never been sent.)
func TestADropWhileInFlightOfADeleteThatLandsEndsItsTombstone(t *testing.T) {
	t.Parallel()
	got, _, err := settledInFlightOf(t, deleteInFlight(t, true, func(s *outbox.Store) {
		ts, err := s.Tombstones(context.Background())
		st, serr := s.Stats(context.Background())
		if err != nil || serr != nil || len(ts) != 0 || st.LastFlush == nil {
			t.Errorf("after the dropped delete landed: tombstones %+v (%v), last flush %v (%v), want none and a last flush", ts, err, st.LastFlush, serr)
		}
	}), false, drop)
	if f := outbox.FailureOf(got.Error); err != nil || got.State != outbox.Done || f.Kind != outbox.Dropped || !strings.HasSuffix(f.Message, outbox.Landed) {
		t.Errorf("the dropped delete whose send landed is %s (%s, %v), want done, dropped, noted as landed", got.State, got.Error, err)
	}
}

// Reviewer 27 D3: a dropped delete whose send in flight found the drawer
// gone already did not land: the note says what the primary answered,
// not that it landed. (It failed before: "it landed there", landed true.)
func TestADropWhileInFlightIsNotNotedLandedForAnAnswerThatIsNoLanding(t *testing.T) {
	t.Parallel()
	got, _, err := settledInFlightOf(t, deleteInFlight(t, false, nil), false, drop)
	f := outbox.FailureOf(got.Error)
	if err != nil || got.State != outbox.Done || f.Kind != outbox.Dropped || strings.Contains(f.Message, outbox.Landed) || strings.Contains(string(got.Error), `"landed":true`) {
		t.Errorf("the dropped delete whose drawer was gone is %s (%s, %v), want done, dropped, not noted as landed", got.State, got.Error, err)
	}
	if !strings.Contains(f.Message, "already gone on the primary") {
		t.Errorf("the dropped delete's note %q does not say what the primary answered", f.Message)
	}
}

// Reviewer 27 D4: delivered of an op whose send in flight then comes back
// refused stays delivered, and the op says that send did not land, as a
// landing is noted: `edge outbox list --all` does not show a write the
// primary refused as delivered with no word of it. (It failed before: only
// a log line said so.)
func TestDeliveredWhileInFlightNotesTheSendThatWasRefused(t *testing.T) {
	t.Parallel()
	got, _, err := settledInFlightOf(t, inFlight{write: outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":""}`)}}, false, func(s *outbox.Store, id string) error {
		_, err := s.Delivered(context.Background(), id)
		return err
	})
	f := outbox.FailureOf(got.Error)
	if err != nil || got.State != outbox.Done || f.Kind != outbox.Delivered {
		t.Fatalf("the op recorded as delivered in flight is %s (%s, %v), want done, delivered", got.State, got.Error, err)
	}
	if !strings.Contains(f.Message, outbox.NotLanded) || !strings.Contains(f.Message, "content must be a non-empty string") || !strings.Contains(string(got.Error), `"landed":false`) {
		t.Errorf("the delivered op whose send was refused says %s, want it noted as not landed, with the primary's words", got.Error)
	}
}
