package ledger

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func opID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// upstream is a write-counting stand-in for the MemPalace primary: every
// call it receives is a write it applies, numbered.
type upstream struct{ calls atomic.Int32 }

func (u *upstream) forward(id string) func(context.Context) (Answer, error) {
	return func(context.Context) (Answer, error) {
		n := u.calls.Add(1)
		text, _ := json.Marshal(fmt.Sprintf(`{"success": true, "drawer_id": "drawer_%d"}`, n))
		return Answer{Status: 200, Body: fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`, id, text)}, nil
	}
}

func call(device, op, id string) Call {
	return Call{Device: device, OpID: op, Tool: "mempalace_add_drawer", ArgsDigest: "d1", RequestID: json.RawMessage(id)}
}

func open(t testing.TB, path string, opt Options) *Ledger {
	t.Helper()
	l, err := OpenOptions(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func result(b []byte) string { return gjson.GetBytes(b, "result").Raw }

func TestSameOpIDReachesUpstreamOnce(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	var u upstream
	op := opID("a")
	a1, o1, err := l.Do(context.Background(), call("laptop", op, "1"), u.forward("1"))
	if err != nil || o1 != OutcomeForwarded {
		t.Fatalf("first: %v %v", o1, err)
	}
	a2, o2, err := l.Do(context.Background(), call("laptop", op, `"second"`), u.forward(`"second"`))
	if err != nil || o2 != OutcomeReplayed {
		t.Fatalf("second: %v %v", o2, err)
	}
	if n := u.calls.Load(); n != 1 {
		t.Fatalf("upstream applied the write %d times", n)
	}
	if result(a1.Body) != result(a2.Body) || result(a1.Body) == "" {
		t.Fatalf("answers differ:\n%s\n%s", a1.Body, a2.Body)
	}
	if id := gjson.GetBytes(a2.Body, "id").Raw; id != `"second"` || a2.Status != 200 {
		t.Fatalf("replay answered with id %s, status %d: %s", id, a2.Status, a2.Body)
	}
}

func TestReplayAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	var u upstream
	op := opID("a")
	l, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	a1, _, err := l.Do(context.Background(), call("laptop", op, "1"), u.forward("1"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	l2 := open(t, path, Options{})
	a2, o, err := l2.Do(context.Background(), call("laptop", op, "2"), u.forward("2"))
	if err != nil || o != OutcomeReplayed || u.calls.Load() != 1 {
		t.Fatalf("after restart: %v %v, upstream calls %d", o, err, u.calls.Load())
	}
	if result(a1.Body) != result(a2.Body) {
		t.Fatalf("answers differ:\n%s\n%s", a1.Body, a2.Body)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ledger file mode %v (%v), want 0600: it holds the upstream's answers", fi.Mode().Perm(), err)
	}
}

func TestDevicesDoNotCollide(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	var u upstream
	op := opID("same")
	a, oa, err := l.Do(context.Background(), call("laptop", op, "1"), u.forward("1"))
	if err != nil {
		t.Fatal(err)
	}
	b, ob, err := l.Do(context.Background(), call("build-box", op, "1"), u.forward("1"))
	if err != nil {
		t.Fatal(err)
	}
	if u.calls.Load() != 2 || oa != OutcomeForwarded || ob != OutcomeForwarded || result(a.Body) == result(b.Body) {
		t.Fatalf("two devices' writes: %d upstream calls, %v %v", u.calls.Load(), oa, ob)
	}
}

// doUntilAnswered calls Do until it stops answering "in flight" (as an
// edge's outbox does, after a backoff).
func doUntilAnswered(l *Ledger, c Call, forward func(context.Context) (Answer, error)) (Answer, Outcome, error) {
	for {
		a, o, err := l.Do(context.Background(), c, forward)
		if !errors.Is(err, ErrInFlight) {
			return a, o, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Duplicates that arrive while the first is in flight are answered at
// once "in flight" (they hold nothing meanwhile); their retries get the
// first's answer, under their own ids. One upstream call in all.
func TestConcurrentDuplicatesOneUpstreamCall(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	var u upstream
	op := opID("dup")
	gate, entered := make(chan struct{}), make(chan struct{})
	first := func(ctx context.Context) (Answer, error) {
		close(entered)
		<-gate
		return u.forward("0")(ctx)
	}
	done := make(chan error)
	go func() { _, _, err := l.Do(context.Background(), call("laptop", op, "0"), first); done <- err }()
	<-entered
	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range errs {
		wg.Go(func() {
			_, _, errs[i] = l.Do(context.Background(), call("laptop", op, fmt.Sprint(i+1)), u.forward(fmt.Sprint(i+1)))
		})
	}
	wg.Wait() // all answered while the first is held: none waits for it
	for i, err := range errs {
		if !errors.Is(err, ErrInFlight) {
			t.Fatalf("duplicate %d while the first is in flight: %v, want ErrInFlight", i, err)
		}
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		a, o, err := l.Do(context.Background(), call("laptop", op, fmt.Sprint(i+1)), u.forward("999"))
		if err != nil || o != OutcomeReplayed || !strings.Contains(result(a.Body), "drawer_1") {
			t.Fatalf("retry %d: %v %v %s", i, o, err, a.Body)
		}
		if id := gjson.GetBytes(a.Body, "id").Raw; id != fmt.Sprint(i+1) {
			t.Fatalf("retry %d answered with id %s", i, id)
		}
	}
	if n := u.calls.Load(); n != 1 {
		t.Fatalf("101 copies reached the upstream %d times", n)
	}
}

func TestTransportFailureNotRecorded(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	var u upstream
	op := opID("t")
	dropped := errors.New("connection reset by peer")
	_, _, err := l.Do(context.Background(), call("laptop", op, "1"), func(context.Context) (Answer, error) {
		u.calls.Add(1)
		return Answer{}, dropped
	})
	if !errors.Is(err, dropped) {
		t.Fatalf("transport failure came back as %v", err)
	}
	_, o, err := l.Do(context.Background(), call("laptop", op, "2"), u.forward("2"))
	if err != nil || o != OutcomeForwarded || u.calls.Load() != 2 {
		t.Fatalf("retry after a transport failure: %v %v, upstream calls %d (want it forwarded again)", o, err, u.calls.Load())
	}
	if _, o, _ := l.Do(context.Background(), call("laptop", op, "3"), u.forward("3")); o != OutcomeReplayed || u.calls.Load() != 2 {
		t.Fatalf("third attempt: %v, upstream calls %d", o, u.calls.Load())
	}
}

// A forward that reached the upstream and lost its answer leaves the op
// in doubt, not open: it is never forwarded again unasked.
func TestALostUpstreamAnswerLeavesTheOpInDoubt(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	var u upstream
	op := opID("lost upstream")
	var resentSeen []bool
	lost := func(ctx context.Context) (Answer, error) {
		u.calls.Add(1)
		resentSeen = append(resentSeen, Resent(ctx))
		return Answer{Status: 502, Body: []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"upstream answer lost"}}`), MaybeApplied: true}, nil
	}
	if _, o, err := l.Do(context.Background(), call("laptop", op, "1"), lost); err != nil || o != OutcomeUnrecorded {
		t.Fatalf("the lost answer: %v %v", o, err)
	}
	if _, _, err := l.Do(context.Background(), call("laptop", op, "2"), u.forward("2")); !errors.Is(err, ErrInDoubt) || u.calls.Load() != 1 {
		t.Fatalf("a retry after a lost upstream answer: %v, %d upstream calls", err, u.calls.Load())
	}
	resend := call("laptop", op, "3")
	resend.Resend = "looked-up"
	if _, o, err := l.Do(context.Background(), resend, lost); err != nil || o != OutcomeUnrecorded || u.calls.Load() != 2 {
		t.Fatalf("resent after a look-up, its answer lost again: %v %v, %d upstream calls", o, err, u.calls.Load())
	}
	if _, o, err := l.Do(context.Background(), resend, u.forward("3")); err != nil || o != OutcomeResent || u.calls.Load() != 3 {
		t.Fatalf("resent after a look-up: %v %v, %d upstream calls", o, err, u.calls.Load())
	}
	// The forward is told when it sends an op in doubt again (the
	// gateway then lets it claim what its first send may have made).
	if !slices.Equal(resentSeen, []bool{false, true}) {
		t.Errorf("Resent(ctx) in the forwards: %v, want false for the first send, true for the resend", resentSeen)
	}
}

func TestFailureAnswersNotRecorded(t *testing.T) {
	text := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for name, a := range map[string]Answer{
		"json-rpc error":    {Status: 200, Body: []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Internal tool error: database is locked"}}`)},
		"isError":           {Status: 200, Body: []byte(`{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":"boom"}]}}`)},
		"success false":     {Status: 200, Body: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + text(`{"success": false, "error": "database is locked"}`) + `}]}}`)},
		"error member":      {Status: 200, Body: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + text(`{"error": "wing not found"}`) + `}]}}`)},
		"structured failed": {Status: 200, Body: []byte(`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"success":false},"content":[]}}`)},
		"bad gateway":       {Status: 502, Body: []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"upstream unreachable"}}`)},
		"sse":               {Status: 200, Body: []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")},
	} {
		t.Run(name, func(t *testing.T) {
			l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
			var u upstream
			op := opID(name)
			got, o, err := l.Do(context.Background(), call("laptop", op, "1"), func(context.Context) (Answer, error) {
				u.calls.Add(1)
				return a, nil
			})
			if err != nil || o != OutcomeUnrecorded || string(got.Body) != string(a.Body) || got.Status != a.Status {
				t.Fatalf("failure answer: %v %v %d %s", o, err, got.Status, got.Body)
			}
			if _, o, err := l.Do(context.Background(), call("laptop", op, "2"), u.forward("2")); err != nil || o != OutcomeForwarded || u.calls.Load() != 2 {
				t.Fatalf("retry: %v %v, upstream calls %d (want forwarded again)", o, err, u.calls.Load())
			}
		})
	}
}

func TestReusedOpIDRefused(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	var u upstream
	op := opID("r")
	if _, _, err := l.Do(context.Background(), call("laptop", op, "1"), u.forward("1")); err != nil {
		t.Fatal(err)
	}
	other := call("laptop", op, "2")
	other.Tool = "mempalace_diary_write"
	if _, _, err := l.Do(context.Background(), other, u.forward("2")); !errors.Is(err, ErrReused) {
		t.Fatalf("another tool under a used op id: %v", err)
	}
	other = call("laptop", op, "3")
	other.ArgsDigest = "d2"
	if _, _, err := l.Do(context.Background(), other, u.forward("3")); !errors.Is(err, ErrReused) {
		t.Fatalf("other arguments under a used op id: %v", err)
	}
	if u.calls.Load() != 1 {
		t.Fatalf("a refused reuse reached the upstream (%d calls)", u.calls.Load())
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func rows(t *testing.T, l *Ledger) int {
	var n int
	l.db.QueryRow(`SELECT count(*) FROM ops`).Scan(&n)
	return n
}

func TestRetentionPrunes(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	c := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	l := open(t, path, Options{Retention: 7 * 24 * time.Hour, Now: c.now})
	var u upstream
	a, b := opID("a"), opID("b")
	l.Do(context.Background(), call("laptop", a, "1"), u.forward("1"))
	c.add(6 * 24 * time.Hour)
	if _, o, _ := l.Do(context.Background(), call("laptop", a, "2"), u.forward("2")); o != OutcomeReplayed {
		t.Fatalf("within the retention: %v", o)
	}
	c.add(2 * 24 * time.Hour)
	// A claim is what prunes (no timer): b's insert prunes a, not b.
	l.Do(context.Background(), call("laptop", b, "3"), u.forward("3"))
	l.bg.Wait()
	if n := rows(t, l); n != 1 {
		t.Fatalf("%d rows after the lazy prune, want 1 (b)", n)
	}
	if _, o, _ := l.Do(context.Background(), call("laptop", a, "4"), u.forward("4")); o != OutcomeForwarded || u.calls.Load() != 3 {
		t.Fatalf("past the retention: %v, upstream calls %d", o, u.calls.Load())
	}

	// Open prunes too.
	l.Close()
	c.add(8 * 24 * time.Hour)
	l2 := open(t, path, Options{Now: c.now})
	if n := rows(t, l2); n != 0 {
		t.Fatalf("%d rows after open past the retention", n)
	}
}

func TestTwoProcessesOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	l1 := open(t, path, Options{})
	l2 := open(t, path, Options{})
	var u upstream
	op := opID("two")
	entered, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var o1 Outcome
	var a1 Answer
	wg.Go(func() {
		a1, o1, _ = l1.Do(context.Background(), call("laptop", op, "1"), func(ctx context.Context) (Answer, error) {
			close(entered)
			<-release
			return u.forward("1")(ctx)
		})
	})
	<-entered
	if _, _, err := l2.Do(context.Background(), call("laptop", op, "2"), u.forward("2")); !errors.Is(err, ErrInFlight) {
		t.Fatalf("the other gateway, while the op is in flight: %v, want ErrInFlight at once", err)
	}
	close(release)
	wg.Wait()
	a2, o2, err := l2.Do(context.Background(), call("laptop", op, "2"), u.forward("2"))
	if err != nil || u.calls.Load() != 1 || o1 != OutcomeForwarded || o2 != OutcomeReplayed || result(a1.Body) != result(a2.Body) {
		t.Fatalf("two gateways, one op: %d upstream calls, %v %v %v", u.calls.Load(), o1, o2, err)
	}

	// Many duplicates on both at once, each retried until answered.
	op = opID("many")
	var wg2 sync.WaitGroup
	for i := range 40 {
		l := []*Ledger{l1, l2}[i%2]
		wg2.Go(func() {
			if _, _, err := doUntilAnswered(l, call("laptop", op, fmt.Sprint(i)), u.forward(fmt.Sprint(i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg2.Wait()
	if u.calls.Load() != 2 {
		t.Fatalf("40 duplicates over two gateways: %d upstream calls, want 1 more", u.calls.Load()-1)
	}
}

// A claim that outlives its holder (a gateway killed mid-forward) is in
// flight, then in doubt: never forwarded again unless the caller says why
// it may be (it looked the write up, or an operator said so).
func TestStaleInflightIsInDoubt(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	c := &clock{t: time.Now()}
	l1 := open(t, path, Options{})
	l2 := open(t, path, Options{Now: c.now})
	var u upstream
	op := opID("stale")
	entered, hang := make(chan struct{}), make(chan struct{})
	defer close(hang)
	go l1.Do(context.Background(), call("laptop", op, "1"), func(context.Context) (Answer, error) {
		u.calls.Add(1)
		close(entered)
		<-hang // a gateway that died mid-forward
		return Answer{}, errors.New("killed")
	})
	<-entered
	if _, _, err := l2.Do(context.Background(), call("laptop", op, "2"), u.forward("2")); !errors.Is(err, ErrInFlight) || u.calls.Load() != 1 {
		t.Fatalf("a fresh inflight row: %v, %d calls; want ErrInFlight at once", err, u.calls.Load())
	}
	c.add(DefaultStaleAfter + DefaultStaleGrace + time.Second)
	if _, _, err := l2.Do(context.Background(), call("laptop", op, "3"), u.forward("3")); !errors.Is(err, ErrInDoubt) || u.calls.Load() != 1 {
		t.Fatalf("a stale inflight row: %v, %d calls; want ErrInDoubt, not forwarded", err, u.calls.Load())
	}
	resend := call("laptop", op, "4")
	resend.Resend = "looked-up"
	if _, o, err := l2.Do(context.Background(), resend, u.forward("4")); err != nil || o != OutcomeResent || u.calls.Load() != 2 {
		t.Fatalf("in doubt, sent again on the caller's word: %v %v, %d calls", o, err, u.calls.Load())
	}
	if _, o, err := l2.Do(context.Background(), call("laptop", op, "5"), u.forward("5")); err != nil || o != OutcomeReplayed {
		t.Fatalf("after the resend: %v %v", o, err)
	}
}

func TestCallerHangUpStillRecorded(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	var u upstream
	op := opID("hangup")
	ctx, cancel := context.WithCancel(context.Background())
	var fwdErr error
	l.Do(ctx, call("laptop", op, "1"), func(fctx context.Context) (Answer, error) {
		cancel() // the edge hangs up while the upstream works
		fwdErr = fctx.Err()
		return u.forward("1")(fctx)
	})
	if fwdErr != nil {
		t.Fatalf("the forward's context ended with the caller's: %v", fwdErr)
	}
	if _, o, _ := l.Do(context.Background(), call("laptop", op, "2"), u.forward("2")); o != OutcomeReplayed || u.calls.Load() != 1 {
		t.Fatalf("retry after a hang-up: %v, %d upstream calls", o, u.calls.Load())
	}
}

func TestDoRejectsBadKeys(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	var u upstream
	for _, c := range []Call{call("", opID("x"), "1"), call("laptop", "ABC", "1"), call("laptop", opID("x")[:63]+"G", "1")} {
		if _, _, err := l.Do(context.Background(), c, u.forward("1")); err == nil {
			t.Fatalf("%+v accepted", c)
		}
	}
	if u.calls.Load() != 0 {
		t.Fatal("a bad key reached the upstream")
	}
}

// BenchmarkDo is the ledger's cost on a write: "fresh" is a new op id
// (claim, forward, record: two commits), "replay" a retried one (answered
// from the record), "none" the forward alone. p50-µs is the median op, the
// figure that survives a shared, noisy machine.
func BenchmarkDo(b *testing.B) {
	l := open(b, filepath.Join(b.TempDir(), FileName), Options{})
	var u upstream
	ctx := context.Background()
	fwd := u.forward("1")
	b.Run("none", func(b *testing.B) {
		timed(b, func(int) { fwd(ctx) })
	})
	b.Run("fresh", func(b *testing.B) {
		run := time.Now().UnixNano() // -count reruns on the same file
		timed(b, func(i int) {
			if _, o, err := l.Do(ctx, call("laptop", opID(fmt.Sprint(run, i)), "1"), fwd); err != nil || o != OutcomeForwarded {
				b.Fatal(o, err)
			}
		})
	})
	op := opID("replay")
	l.Do(ctx, call("laptop", op, "1"), fwd)
	b.Run("replay", func(b *testing.B) {
		timed(b, func(int) {
			if _, o, err := l.Do(ctx, call("laptop", op, "2"), fwd); err != nil || o != OutcomeReplayed {
				b.Fatal(o, err)
			}
		})
	})
}

func TestPanickingForwardReleasesTheKey(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	op := opID("panic")
	entered := make(chan struct{})
	boom := make(chan struct{})
	panicked := make(chan struct{})
	go func() {
		defer close(panicked)
		defer func() { recover() }() // net/http recovers a handler's panic the same way
		l.Do(context.Background(), call("laptop", op, "1"), func(context.Context) (Answer, error) {
			close(entered)
			<-boom
			panic("forward bug")
		})
	}()
	<-entered
	if _, _, err := l.Do(context.Background(), call("laptop", op, "2"), (&upstream{}).forward("2")); !errors.Is(err, ErrInFlight) {
		t.Fatalf("a duplicate while the first is in flight: %v", err)
	}
	close(boom)
	<-panicked
	// The key is open again at once (not after StaleAfter).
	var u upstream
	if _, o, err := l.Do(context.Background(), call("laptop", op, "3"), u.forward("3")); err != nil || o != OutcomeForwarded {
		t.Fatalf("after a panic: %v %v", o, err)
	}
}

// timed runs op b.N times and reports the median and p90 op and the
// process's CPU time per op (what the shared machine's load does not
// inflate the way it does wall time).
func timed(b *testing.B, op func(i int)) {
	d := make([]time.Duration, 0, b.N)
	i := 0
	cpu := cpuTime()
	for b.Loop() {
		i++
		t := time.Now()
		op(i)
		d = append(d, time.Since(t))
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/1000/float64(len(d)), "cpu-µs/op")
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1000, "p50-µs")
	b.ReportMetric(float64(d[len(d)*9/10].Nanoseconds())/1000, "p90-µs")
}

func TestUnreadableLedgerDoesNotForward(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), FileName), 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	var u upstream
	if _, _, err := l.Do(context.Background(), call("laptop", opID("x"), "1"), u.forward("1")); !errors.Is(err, ErrUnavailable) || u.calls.Load() != 0 {
		t.Fatalf("closed ledger: %v, %d upstream calls", err, u.calls.Load())
	}
}

func TestOpenRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte("this is not a database, it is a text file of some length........................................................................................"), 0o600)
	if _, err := Open(path, 0); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a garbage file opened: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), FileName), -time.Hour); err == nil {
		t.Fatal("a negative retention was accepted")
	}
}

// TestWALStaysBounded: with SQLite's own checkpoints off (they would
// fsync on a request), the background checkpoints keep the WAL from
// growing with every write, also under a stream with no pause.
func TestWALStaysBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	l := open(t, path, Options{})
	var u upstream
	const ops = 5000 // about 85 MiB of WAL with no checkpoint
	for i := range ops {
		if _, _, err := l.Do(context.Background(), call("laptop", opID(fmt.Sprint("wal", i)), "1"), u.forward("1")); err != nil {
			t.Fatal(err)
		}
	}
	l.bg.Wait()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 48<<20 { // 87 MiB with no checkpoint, 12-16 MiB measured
		t.Fatalf("WAL is %d MiB after %d writes", fi.Size()>>20, ops)
	}
	t.Logf("WAL %.1f MiB after %d writes", float64(fi.Size())/(1<<20), ops)
}

// A ledger from before the doubt state is rebuilt when opened, its rows
// (and their order) kept.
func TestAnOlderLedgerIsMigrated(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE ops(device TEXT NOT NULL, op_id TEXT NOT NULL, tool TEXT NOT NULL, args_digest TEXT NOT NULL,
		state TEXT NOT NULL CHECK (state IN ('inflight','open','done')), claim TEXT NOT NULL DEFAULT '', result TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
		CREATE UNIQUE INDEX ops_key ON ops(device, op_id);
		INSERT INTO ops VALUES('laptop', ?, 'mempalace_add_drawer', 'd1', 'done', '', '{"content":[]}', ?, ?)`, opID("old"), time.Now().UnixMilli(), time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	l := open(t, path, Options{})
	if _, o, err := l.Do(context.Background(), call("laptop", opID("old"), "1"), (&upstream{}).forward("1")); err != nil || o != OutcomeReplayed {
		t.Fatalf("a row of the older ledger: %v %v", o, err)
	}
	lost := func(ctx context.Context) (Answer, error) { return Answer{Status: 502, MaybeApplied: true}, nil }
	if _, _, err := l.Do(context.Background(), call("laptop", opID("new"), "2"), lost); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Do(context.Background(), call("laptop", opID("new"), "3"), lost); !errors.Is(err, ErrInDoubt) {
		t.Fatalf("the doubt state in a migrated ledger: %v", err)
	}
}

// An op whose first send found its record on the upstream already
// (Held: a touch, a kg_add of a current fact) is, sent again out of
// doubt, not told Resent: what the upstream holds is not that send's
// (attack24 M1-M3). The fact is kept with the op: across a lost answer,
// a gateway that stopped mid-forward, and a lost resend; a send after
// one that was not applied looks again.
func TestAResendOfAnOpWhoseFirstSendFoundItsRecordIsNotResent(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	c := &clock{t: time.Now()}
	l := open(t, path, Options{Now: c.now})
	var seen []bool
	send := func(held bool, status int) func(context.Context) (Answer, error) {
		return func(ctx context.Context) (Answer, error) {
			seen = append(seen, Resent(ctx))
			if held {
				if err := Held(ctx); err != nil {
					t.Fatal(err)
				}
			}
			return Answer{Status: status, Body: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"success\": true}"}]}}`), MaybeApplied: status == 502}, nil
		}
	}
	resend := func(op string) Call { c := call("laptop", op, "2"); c.Resend = "looked-up"; return c }
	do := func(c Call, f func(context.Context) (Answer, error)) {
		t.Helper()
		if _, _, err := l.Do(context.Background(), c, f); err != nil {
			t.Fatal(err)
		}
	}

	lost := opID("held, lost")
	do(call("laptop", lost, "1"), send(true, 502))
	do(resend(lost), send(true, 502)) // a resend saying Held changes nothing
	do(resend(lost), send(false, 200))
	if !slices.Equal(seen, []bool{false, false, false}) {
		t.Errorf("an op whose first send found its record, its answer lost: Resent %v, want false in every send", seen)
	}

	seen = nil
	stopped := opID("held, gateway stopped")
	l.Do(context.Background(), call("laptop", stopped, "1"), func(ctx context.Context) (Answer, error) {
		if err := Held(ctx); err != nil {
			t.Fatal(err)
		}
		return Answer{}, errors.New("killed")
	})
	if _, err := l.db.Exec(`UPDATE ops SET state='inflight' WHERE op_id=?`, stopped); err != nil { // as a gateway that died mid-forward leaves it
		t.Fatal(err)
	}
	c.add(DefaultStaleAfter + DefaultStaleGrace + time.Second)
	do(resend(stopped), send(false, 200))
	if !slices.Equal(seen, []bool{false}) {
		t.Errorf("an op whose first send found its record, its gateway stopped: Resent %v, want false", seen)
	}

	seen = nil
	again := opID("held, not applied, then lost")
	do(call("laptop", again, "1"), send(true, 503))  // not applied: open again
	do(call("laptop", again, "1"), send(false, 502)) // sent again: its record was not there this time
	do(resend(again), send(false, 200))
	if !slices.Equal(seen, []bool{false, false, true}) {
		t.Errorf("an op sent again after a send that was not applied: Resent %v, want true in its resend", seen)
	}
}

// A ledger from before Held opens with its rows: an op it holds in doubt
// is, sent again, Resent (its first send's look-up was not kept).
func TestALedgerFromBeforeHeldOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE ops(device TEXT NOT NULL, op_id TEXT NOT NULL, tool TEXT NOT NULL, args_digest TEXT NOT NULL,
		state TEXT NOT NULL CHECK (state IN ('inflight','open','done','doubt')), claim TEXT NOT NULL DEFAULT '', result TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
		CREATE UNIQUE INDEX ops_key ON ops(device, op_id);
		INSERT INTO ops VALUES('laptop', ?, 'mempalace_add_drawer', 'd1', 'doubt', '', NULL, ?, ?)`, opID("old"), time.Now().UnixMilli(), time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	l := open(t, path, Options{})
	resend := call("laptop", opID("old"), "1")
	resend.Resend = "looked-up"
	var resent bool
	if _, o, err := l.Do(context.Background(), resend, func(ctx context.Context) (Answer, error) {
		resent = Resent(ctx)
		return (&upstream{}).forward("1")(ctx)
	}); err != nil || o != OutcomeResent || !resent {
		t.Fatalf("an op in doubt in a ledger from before Held, sent again: %v %v, Resent %v", o, err, resent)
	}
}

// Applied settles an op the ledger holds no answer for (in doubt) with
// the operator's answer, which every later call gets without a forward;
// an op answered already keeps its answer.
func TestAppliedSettlesAnOpInDoubt(t *testing.T) {
	ctx := context.Background()
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	var u upstream
	lost := func(context.Context) (Answer, error) {
		return Answer{Status: 502, Body: []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"upstream answer lost"}}`), MaybeApplied: true}, nil
	}
	doubt, done := opID("in doubt"), opID("done")
	if _, _, err := l.Do(ctx, call("laptop", doubt, "1"), lost); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Do(ctx, call("laptop", done, "1"), u.forward("1")); err != nil {
		t.Fatal(err)
	}
	const restored = `{"content":[{"type":"text","text":"{\"success\": true, \"recovered\": \"restored\"}"}]}`
	for op, want := range map[string]bool{doubt: true, done: false, opID("never sent"): false} {
		if ok, err := l.Applied(ctx, "laptop", op, []byte(restored)); err != nil || ok != want {
			t.Errorf("Applied(%s): %v %v, want %v", op[:8], ok, err, want)
		}
	}
	resend := call("laptop", doubt, "2")
	resend.Resend = "looked-up"
	if ans, o, err := l.Do(ctx, resend, u.forward("2")); err != nil || o != OutcomeReplayed || result(ans.Body) != restored {
		t.Errorf("the op's resend: %v %v %s, want the operator's answer", o, err, ans.Body)
	}
	if ans, o, err := l.Do(ctx, call("laptop", done, "3"), u.forward("3")); err != nil || o != OutcomeReplayed || !strings.Contains(result(ans.Body), "drawer_1") || u.calls.Load() != 1 {
		t.Errorf("the answered op: %v %v %s, %d upstream calls", o, err, ans.Body, u.calls.Load())
	}
}

// What an op's first send noted before sending (a diary room's size and
// newest entry) reaches a resend on the caller's look-up of the op held in
// doubt, which the gateway compares with the room then (attack74 F5); an
// operator's resend is sent whatever was noted, and a first send again
// (after one that was not applied) starts with nothing noted.
func TestWhatAFirstSendNotedReachesItsLookedUpResend(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	ctx := context.Background()
	lost := func(note string, status int) func(context.Context) (Answer, error) {
		return func(ctx context.Context) (Answer, error) {
			if note != "" {
				if err := NoteBefore(ctx, note); err != nil {
					t.Fatal(err)
				}
			}
			return Answer{Status: status, MaybeApplied: status == 504}, nil
		}
	}
	seen := func(why string) string {
		c := call("laptop", opID("d"), "1")
		c.Resend = why
		var before string
		if _, _, err := l.Do(ctx, c, func(ctx context.Context) (Answer, error) {
			before = Before(ctx)
			return Answer{Status: 504, MaybeApplied: true}, nil // still in doubt
		}); err != nil {
			t.Fatal(err)
		}
		return before
	}
	l.Do(ctx, call("laptop", opID("d"), "1"), lost("7 20261206_230112000000", 504))
	if got := seen("looked-up"); got != "7 20261206_230112000000" {
		t.Fatalf("a looked-up resend sees %q, want what the first send noted", got)
	}
	if got := seen("looked-up"); got != "7 20261206_230112000000" {
		t.Fatalf("a second looked-up resend sees %q, want what the first send noted", got)
	}
	if got := seen("operator"); got != "" {
		t.Fatalf("an operator's resend sees %q, want nothing", got)
	}
	l.Do(ctx, call("laptop", opID("e"), "1"), lost("3 x", 503)) // not applied: open
	l.Do(ctx, call("laptop", opID("e"), "1"), lost("", 504))    // a first send again, noting nothing
	c := call("laptop", opID("e"), "1")
	c.Resend = "looked-up"
	l.Do(ctx, c, func(ctx context.Context) (Answer, error) {
		if got := Before(ctx); got != "" {
			t.Errorf("after a first send again, a resend sees %q, the earlier send's note", got)
		}
		return Answer{Status: 504, MaybeApplied: true}, nil
	})
	// review25 finding 4: a gateway from before notes takes an open op
	// again without clearing a note and notes nothing; its answer lost,
	// the op is in doubt. Upgraded, the looked-up resend must not see the
	// earlier send's note.
	l.Do(ctx, call("laptop", opID("f"), "1"), lost("5 y", 503)) // not applied: open
	// The older gateway's send, its answer lost:
	if _, err := l.db.Exec(`UPDATE ops SET state='doubt' WHERE op_id=?`, opID("f")); err != nil {
		t.Fatal(err)
	}
	c.OpID = opID("f")
	l.Do(ctx, c, func(ctx context.Context) (Answer, error) {
		if got := Before(ctx); got != "" {
			t.Errorf("after an older gateway's first send again, a resend sees %q, the earlier send's note", got)
		}
		return Answer{Status: 504, MaybeApplied: true}, nil
	})
}

// The same write under a kin device (the one a call says its op was
// queued as, or one whose row says its op was queued as the caller) is
// not sent again while it is in flight there, nor while it is in doubt
// unless the caller looked it up; another write under the op id is the
// caller's own (attack80 F1), and each row is its sender's.
func TestAWriteInFlightOrInDoubtUnderAKinDeviceIsNotSentAgain(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
	u := &upstream{}
	op := opID("kin")
	queuedAs := func(c Call) Call { c.QueuedAs = "old"; return c }
	l.Do(context.Background(), call("old", op, "1"), func(ctx context.Context) (Answer, error) {
		if _, _, err := l.Do(context.Background(), queuedAs(call("new", op, "2")), u.forward("2")); !errors.Is(err, ErrInFlight) {
			t.Errorf("the same write while the old device's send is in flight: %v", err)
		}
		other := queuedAs(call("third", op, "3"))
		other.ArgsDigest = "d2"
		if _, o, err := l.Do(context.Background(), other, u.forward("3")); err != nil || o != OutcomeForwarded {
			t.Errorf("another write under the op id: %v %v, want the caller's own, forwarded", o, err)
		}
		return Answer{Status: 502, MaybeApplied: true}, nil
	})
	if _, _, err := l.Do(context.Background(), queuedAs(call("new", op, "4")), u.forward("4")); !errors.Is(err, ErrInDoubt) {
		t.Errorf("the same write in doubt under the old device: %v", err)
	}
	looked := queuedAs(call("new", op, "5"))
	looked.Resend = "looked-up"
	if _, o, err := l.Do(context.Background(), looked, u.forward("5")); err != nil || o != OutcomeForwarded {
		t.Errorf("the same write looked up: %v %v, want forwarded", o, err)
	}
	if a, o, err := l.Do(context.Background(), call("old", opID("kin 2"), "6"), u.forward("6")); err != nil || o != OutcomeForwarded || a.RecordOf != "" {
		t.Fatal(a, o, err)
	}
	if a, o, err := l.Do(context.Background(), queuedAs(call("new", opID("kin 2"), "7")), u.forward("7")); err != nil || o != OutcomeReplayed || a.RecordOf != "old" {
		t.Errorf("the same write done under the old device: %v %v from %q", o, err, a.RecordOf)
	}
	if n := u.calls.Load(); n != 3 {
		t.Errorf("forwarded %d times, want 3", n)
	}
}

// Outside tester attack81 F2: a devbox copied twice and both copies
// renamed; each retries the original's pre-copy op naming the original.
// The second claim finds the first's row (the same write, claiming the
// same device), whichever copy sends first: answered from its record
// when done, ErrInFlight while in flight, ErrInDoubt while in doubt
// unless looked up. It failed before: neither found the other, and the
// write was forwarded twice.
func TestTwoCopiesClaimingOneDevicesOpFileItOnce(t *testing.T) {
	for _, order := range [][2]string{{"copy-x", "copy-y"}, {"copy-y", "copy-x"}} {
		t.Run(order[0]+" first", func(t *testing.T) {
			l := open(t, filepath.Join(t.TempDir(), FileName), Options{})
			u := &upstream{}
			ctx := context.Background()
			claim := func(dev, op, id string) Call { c := call(dev, opID(op), id); c.QueuedAs = "orig"; return c }
			first, second := order[0], order[1]
			l.Do(ctx, claim(first, "flight", "1"), func(context.Context) (Answer, error) {
				if _, _, err := l.Do(ctx, claim(second, "flight", "2"), u.forward("2")); !errors.Is(err, ErrInFlight) {
					t.Errorf("the same write while the other copy's send is in flight: %v", err)
				}
				return Answer{Status: 502, MaybeApplied: true}, nil
			})
			if _, _, err := l.Do(ctx, claim(second, "flight", "3"), u.forward("3")); !errors.Is(err, ErrInDoubt) {
				t.Errorf("the same write in doubt under the other copy: %v", err)
			}
			looked := claim(second, "flight", "4")
			looked.Resend = "looked-up"
			if _, o, err := l.Do(ctx, looked, u.forward("4")); err != nil || o != OutcomeForwarded {
				t.Errorf("the same write looked up: %v %v, want forwarded", o, err)
			}
			if a, o, err := l.Do(ctx, claim(first, "done", "5"), u.forward("5")); err != nil || o != OutcomeForwarded || a.RecordOf != "" {
				t.Fatal(a, o, err)
			}
			if a, o, err := l.Do(ctx, claim(second, "done", "6"), u.forward("6")); err != nil || o != OutcomeReplayed || a.RecordOf != first {
				t.Errorf("the same write done under the other copy: %v %v from %q", o, err, a.RecordOf)
			}
			other := claim(second, "other", "7")
			l.Do(ctx, claim(first, "other", "7"), u.forward("7"))
			other.ArgsDigest = "d2"
			if _, o, err := l.Do(ctx, other, u.forward("8")); err != nil || o != OutcomeForwarded {
				t.Errorf("another write under the op id: %v %v, want the caller's own, forwarded", o, err)
			}
			if n := u.calls.Load(); n != 4 {
				t.Errorf("forwarded %d times, want 4", n)
			}
		})
	}
}
