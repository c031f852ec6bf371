package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// memPrimary is the double called in process (no network, no latency),
// so the outbox itself is what is measured.
type memPrimary struct{ pl *fakepalace.Palace }

func (m memPrimary) Up() bool { return true }

func (m memPrimary) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	resp, err := m.pl.Handle(b)
	if err != nil {
		return nil, err
	}
	var r struct {
		Result struct{ Content []struct{ Text string } }
		Error  *struct {
			Code    int
			Message string
		}
	}
	json.Unmarshal(resp, &r)
	if r.Error != nil {
		return nil, &outbox.RPCError{Code: r.Error.Code, Message: r.Error.Message}
	}
	var out map[string]any
	json.Unmarshal([]byte(r.Result.Content[0].Text), &out)
	return out, nil
}

func openBench(b *testing.B) *outbox.Store {
	s, err := outbox.Open(filepath.Join(b.TempDir(), "outbox.sqlite"), "dev", "lab")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkEnqueue: one durable enqueue (synchronous=FULL, fsync'd WAL).
// Reports the median as well as the mean.
func BenchmarkEnqueue(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := []byte(fmt.Sprintf(`{"wing":"w","room":"r","content":"drawer %d with a realistic sentence of content"}`, i))
		t := time.Now()
		if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: p, Wing: "w"}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median-ms")
}

// BenchmarkFlush: ops/s drained to an in-process primary with no latency.
func BenchmarkFlush(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for it := 0; it < b.N; it++ {
				b.StopTimer()
				s := openBench(b)
				pl, _ := fakepalace.New(fakepalace.Options{})
				ctx := context.Background()
				fill(b, s, n)
				f := &outbox.Flusher{S: s, P: memPrimary{pl}}
				b.StartTimer()
				t := time.Now()
				sent, err := f.Drain(ctx)
				el := time.Since(t)
				if err != nil || sent != n {
					b.Fatalf("sent %d of %d: %v", sent, n, err)
				}
				b.ReportMetric(float64(n)/el.Seconds(), "ops/s")
			}
		})
	}
}

// BenchmarkFlushScaling: 100,000 queued ops; time per op and heap stay
// flat as the queue drains (measured per 10,000-op slice).
func BenchmarkFlushScaling(b *testing.B) {
	const n, slice = 100000, 10000
	s := openBench(b)
	pl, _ := fakepalace.New(fakepalace.Options{})
	fill(b, s, n)
	f := &outbox.Flusher{S: s, P: sliceLimited{memPrimary{pl}, slice}}
	ctx := context.Background()
	b.ResetTimer()
	var first, last time.Duration
	var heapFirst, heapLast uint64
	for i := 0; i < n/slice; i++ {
		t := time.Now()
		sent, _ := f.Drain(ctx)
		el := time.Since(t)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if i == 0 {
			first, heapFirst = el, ms.HeapAlloc
		}
		last, heapLast = el, ms.HeapAlloc
		if sent != slice {
			b.Fatalf("slice %d sent %d", i, sent)
		}
		sentInSlice = 0
		pl2, _ := fakepalace.New(fakepalace.Options{}) // a fresh primary: its own map must not grow the heap
		f.P = sliceLimited{memPrimary{pl2}, slice}
	}
	b.ReportMetric(first.Seconds()*1000, "first-10k-ms")
	b.ReportMetric(last.Seconds()*1000, "last-10k-ms")
	b.ReportMetric(float64(heapFirst)/1e6, "heap-first-MB")
	b.ReportMetric(float64(heapLast)/1e6, "heap-last-MB")
}

// sliceLimited reports "down" after limit sends, so Drain returns per slice.
type sliceLimited struct {
	memPrimary
	limit int
}

var sentInSlice int

func (s sliceLimited) Up() bool { return sentInSlice < s.limit }

func (s sliceLimited) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	sentInSlice++
	return s.memPrimary.Call(ctx, tool, args)
}

func fill(b *testing.B, s *outbox.Store, n int) {
	ctx := context.Background()
	sentInSlice = 0
	for i := 0; i < n; i++ {
		p := []byte(fmt.Sprintf(`{"type":"bench","stream":"s","room":"r","from_agent":"a","body":"event %d"}`, i))
		if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_event_append", Payload: p}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIntentThenPromote: what a write costs the outbox since it is
// kept as an intent before the local palace gets it (two durable
// transactions: the intent, then its promotion), beside BenchmarkEnqueue
// (one, as before). Reports the median as well as the mean.
func BenchmarkIntentThenPromote(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := []byte(fmt.Sprintf(`{"wing":"w","room":"r","content":"drawer %d with a realistic sentence of content"}`, i))
		t := time.Now()
		op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: p, Wing: "w", Intent: true})
		if err == nil {
			_, err = s.Promote(ctx, op, false, "")
		}
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median-ms")
}
