package ledger

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTwoOSProcessesOneFile runs two gateway processes (this test binary,
// re-executed) on one ledger file, each sending the same op id from 20
// goroutines at once: the upstream (a file each forward appends a line
// to) sees one write, and all 40 callers get its answer.
func TestTwoOSProcessesOneFile(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "upstream-calls")
	op := opID("two processes")
	outs := make([]bytes.Buffer, 2)
	var wg sync.WaitGroup
	for i := range outs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLedgerChildProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "LEDGER_CHILD=1", "LEDGER_PATH="+filepath.Join(dir, FileName), "LEDGER_CALLS="+calls, "LEDGER_OP="+op)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("child %d: %v\n%s", i, err, outs[i].String())
			}
		})
	}
	wg.Wait()
	b, _ := os.ReadFile(calls)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Fatalf("two processes forwarded the op %d times:\n%s", n, b)
	}
	answers := map[string]int{}
	for _, o := range outs {
		for _, line := range strings.Split(o.String(), "\n") {
			if a, ok := strings.CutPrefix(strings.TrimSpace(line), "answer "); ok {
				answers[a]++
			}
		}
	}
	if len(answers) != 1 {
		t.Fatalf("callers got different answers: %v", answers)
	}
	for a, n := range answers {
		if n != 40 || !strings.Contains(a, strings.TrimSpace(string(b))) {
			t.Fatalf("%d callers got %s; the upstream wrote %s", n, a, b)
		}
	}
}

// TestLedgerChildProcess is one of TestTwoOSProcessesOneFile's gateways.
func TestLedgerChildProcess(t *testing.T) {
	if os.Getenv("LEDGER_CHILD") != "1" {
		t.Skip("run by TestTwoOSProcessesOneFile")
	}
	l, err := Open(os.Getenv("LEDGER_PATH"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	forward := func(context.Context) (Answer, error) {
		me := fmt.Sprintf("pid-%d", os.Getpid())
		f, err := os.OpenFile(os.Getenv("LEDGER_CALLS"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return Answer{}, err
		}
		fmt.Fprintln(f, me)
		f.Close()
		time.Sleep(100 * time.Millisecond) // the other process's copies arrive meanwhile
		return Answer{Status: 200, Body: fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"success\": true, \"by\": \"%s\"}"}]}}`, me)}, nil
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			a, _, err := doUntilAnswered(l, call("laptop", os.Getenv("LEDGER_OP"), fmt.Sprint(i)), forward)
			if err != nil {
				t.Error(err)
				return
			}
			fmt.Printf("answer %s\n", result(a.Body))
		})
	}
	wg.Wait()
}

// An op in flight in a gateway process that was killed mid-forward is in
// doubt once StaleGrace has passed since its claim, for the next process on the file (a resend settles it by
// its look-up), not "being forwarded now" until StaleAfter+StaleGrace:
// no process forwards it any more. While that process lives, it is in
// flight. Before, a restarted gateway answered ErrInFlight for ~2
// minutes (outside tester, attack48 part 3).
func TestAnOpInFlightInAKilledProcessIsInDoubtAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	op := opID("killed mid-forward")
	cmd := hangingGateway(t, path, op)
	var later atomic.Bool // the clock StaleGrace after now
	l := open(t, path, Options{Now: func() time.Time {
		if later.Load() {
			return time.Now().Add(DefaultStaleGrace + time.Second)
		}
		return time.Now()
	}})
	var u upstream
	if _, _, err := l.Do(context.Background(), call("laptop", op, "a"), u.forward("1")); !errors.Is(err, ErrInFlight) {
		t.Fatalf("while its gateway forwards it: %v, want in flight", err)
	}
	abandoned := func() bool {
		t.Helper()
		ok, err := l.Abandoned(context.Background(), "laptop", op)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if abandoned() {
		t.Error("Abandoned while its gateway forwards it")
	}
	cmd.Process.Kill()
	cmd.Wait() // killed: its error says so
	// Within StaleGrace of its claim the upstream may still be applying
	// what the dead process forwarded: in flight still (the reviewer's
	// note: a look-up then could miss it and the resend apply it twice).
	if _, _, err := l.Do(context.Background(), call("laptop", op, "a"), u.forward("1")); !errors.Is(err, ErrInFlight) {
		t.Fatalf("its gateway killed a moment ago: %v, want in flight", err)
	}
	if abandoned() {
		t.Error("Abandoned a moment after its gateway was killed")
	}
	later.Store(true)
	if !abandoned() {
		t.Error("not Abandoned StaleGrace after its gateway was killed")
	}
	if _, _, err := l.Do(context.Background(), call("laptop", op, "a"), u.forward("1")); !errors.Is(err, ErrInDoubt) {
		t.Fatalf("its gateway killed: %v, want in doubt at once", err)
	}
	c := call("laptop", op, "a")
	c.Resend = "looked-up"
	if _, outcome, err := l.Do(context.Background(), c, u.forward("1")); err != nil || outcome != OutcomeResent || u.calls.Load() != 1 {
		t.Fatalf("a resend after its look-up: %v %v, want resent", outcome, err)
	}
}

// A restore's Applied (gateway trash restore) settles an op a killed
// gateway process left in flight at once, as a resend's look-up does:
// before, it was left alone as "in flight now" for StaleAfter+StaleGrace
// (~2 minutes), so the restore's resend could delete again. While that
// process lives, the op is left alone.
func TestAppliedSettlesAnOpInFlightInAKilledProcessAtOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	op := opID("killed mid-forward, then restored")
	cmd := hangingGateway(t, path, op)
	l := open(t, path, Options{})
	const restored = `{"content":[{"type":"text","text":"{\"success\": true, \"recovered\": \"restored\"}"}]}`
	if ok, err := l.Applied(ctx, "laptop", op, []byte(restored)); err != nil || ok {
		t.Fatalf("while its gateway forwards it: Applied %v %v, want left alone", ok, err)
	}
	cmd.Process.Kill()
	cmd.Wait() // killed: its error says so
	if ok, err := l.Applied(ctx, "laptop", op, []byte(restored)); err != nil || !ok {
		t.Fatalf("its gateway killed: Applied %v %v, want settled at once", ok, err)
	}
	var u upstream
	if ans, o, err := l.Do(ctx, call("laptop", op, "2"), u.forward("2")); err != nil || o != OutcomeReplayed || result(ans.Body) != restored || u.calls.Load() != 0 {
		t.Fatalf("the op sent again: %v %v %s, %d upstream calls; want the restore's answer", o, err, ans.Body, u.calls.Load())
	}
}

// hangingGateway starts TestLedgerHangingChild on the ledger at path and
// returns once it holds op in flight.
func hangingGateway(t *testing.T, path, op string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLedgerHangingChild$", "-test.v")
	cmd.Env = append(os.Environ(), "LEDGER_HANG=1", "LEDGER_PATH="+path, "LEDGER_OP="+op)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) // killed already, or at the test's end
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "forwarding" {
	}
	return cmd
}

// TestLedgerHangingChild is hangingGateway's gateway: it claims the op and forwards it until it is killed.
func TestLedgerHangingChild(t *testing.T) {
	if os.Getenv("LEDGER_HANG") != "1" {
		t.Skip("run by hangingGateway")
	}
	l, err := Open(os.Getenv("LEDGER_PATH"), 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Do(context.Background(), call("laptop", os.Getenv("LEDGER_OP"), "a"), func(ctx context.Context) (Answer, error) {
		fmt.Println("forwarding")
		<-ctx.Done() // killed first
		return Answer{}, ctx.Err()
	})
}
