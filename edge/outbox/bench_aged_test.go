package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// okPrimary takes every write at once: the outbox's own cost is measured.
type okPrimary struct{}

func (okPrimary) Up() bool { return true }
func (okPrimary) Call(context.Context, string, json.RawMessage) (map[string]any, error) {
	return map[string]any{"success": true, "drawer_id": "drawer_w_r_0123456789abcdef01234567", "wing": "w", "room": "r", "chunks": 1}, nil
}

// pass puts n ops through s the way the outbox leaves them once sent: done
// rows with a payload and an answer of about 2 KB (the 427 MB for
// 200,000 ops), written in large transactions (the benchmark ages a file;
// enqueue's own fsync per op is measured on its own).
func pass(b *testing.B, s *Store, n int, at time.Time) {
	tx, err := s.flushDB.Begin()
	if err != nil {
		b.Fatal(err)
	}
	st, err := tx.Prepare(`INSERT INTO ops(op_id, dedupe_key, tool_name, payload_json, wing, lane, state, attempts, created_at, flushed_at, result_json)
		VALUES(?, ?, 'mempalace_add_drawer', ?, 'w', 'palace', 'done', 1, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	filler := strings.Repeat("a realistic sentence of a drawer's content. ", 36)
	for i := range n {
		id := NewOpID()
		if _, err := st.Exec(id, "op:"+id, fmt.Sprintf(`{"wing":"w","room":"r","content":"%d %s"}`, i, filler), at.UnixMilli(), at.UnixMilli(),
			`{"success":true,"drawer_id":"drawer_w_r_0123456789abcdef01234567","wing":"w","room":"r","chunks":2}`); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

func fileBytes(path string) int64 {
	var n int64
	for _, f := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// BenchmarkAgedOutbox: an outbox through which 1,000,000 ops have passed,
// all older than the retention (put through in 20 batches of 50,000, each
// pruned once it aged past the retention, as the running flusher does),
// beside a fresh one: file size, then enqueue and flush latency measured
// alternately, op by op, on the two.
func BenchmarkAgedOutbox(b *testing.B) {
	total, batch := 1_000_000, 50_000
	if v := os.Getenv("AGED_OPS"); v != "" {
		fmt.Sscan(v, &total)
		batch = min(batch, total)
	}
	dir := b.TempDir()
	clock := time.Now()
	now := func() time.Time { return clock }
	open := func(name string) *Store {
		s, err := OpenOptions(filepath.Join(dir, name, FileName), Options{Device: "dev", Label: "lab", Now: now})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	aged := open("aged")
	ctx := context.Background()
	peak := int64(0)
	for passed := 0; passed < total; passed += batch {
		pass(b, aged, batch, clock)
		peak = max(peak, fileBytes(aged.Path()))
		clock = clock.Add(DefaultRetention + time.Hour)
		if n, err := aged.Prune(ctx, DefaultRetention); err != nil || n != int64(batch) {
			b.Fatalf("pruned %d, %v", n, err)
		}
	}
	aged.Close()
	fresh := open("fresh")
	fresh.Close()
	agedSize, freshSize := fileBytes(filepath.Join(dir, "aged", FileName)), fileBytes(filepath.Join(dir, "fresh", FileName))
	aged, fresh = open("aged"), open("fresh")
	defer aged.Close()
	defer fresh.Close()

	type side struct {
		s          *Store
		f          *Flusher
		enq, flush []time.Duration
	}
	sides := []*side{{s: fresh}, {s: aged}}
	for _, sd := range sides {
		sd.f = &Flusher{S: sd.s, P: okPrimary{}}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for _, sd := range sides {
			p := []byte(fmt.Sprintf(`{"wing":"w","room":"r","content":"benchmark op %d"}`, i))
			t := time.Now()
			if _, err := sd.s.Enqueue(ctx, Write{Name: "mempalace_add_drawer", Payload: p}); err != nil {
				b.Fatal(err)
			}
			sd.enq = append(sd.enq, time.Since(t))
			t = time.Now()
			if n, err := sd.f.Drain(ctx); err != nil || n != 1 {
				b.Fatalf("flushed %d: %v", n, err)
			}
			sd.flush = append(sd.flush, time.Since(t))
		}
	}
	p := func(d []time.Duration, q float64) float64 {
		slices.Sort(d)
		return float64(d[int(float64(len(d)-1)*q)].Microseconds()) / 1000
	}
	b.ReportMetric(float64(total), "ops-passed")
	b.ReportMetric(float64(peak)/1e6, "aged-peak-MB")
	b.ReportMetric(float64(agedSize)/1e3, "aged-KB")
	b.ReportMetric(float64(freshSize)/1e3, "fresh-KB")
	for _, q := range []struct {
		name string
		at   float64
	}{{"p50", 0.5}, {"p90", 0.9}} {
		b.ReportMetric(p(sides[0].enq, q.at), "fresh-enqueue-"+q.name+"-ms")
		b.ReportMetric(p(sides[1].enq, q.at), "aged-enqueue-"+q.name+"-ms")
		b.ReportMetric(p(sides[0].flush, q.at), "fresh-flush-"+q.name+"-ms")
		b.ReportMetric(p(sides[1].flush, q.at), "aged-flush-"+q.name+"-ms")
	}
}
