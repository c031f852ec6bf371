package outbox

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkDeadOps: the look-ups a tool answer the edge builds makes (the
// dead ops to tell the agent of), on an outbox with 20,000 done ops: News,
// at every answer (a relayed one too), and DeadOps, when News changed,
// with none dead, then with 3 dead.
func BenchmarkDeadOps(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), FileName), "dev", "lab")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pass(b, s, 20000, time.Now())
	ctx := context.Background()
	b.Run("news", func(b *testing.B) {
		for b.Loop() {
			if n, err := s.News(ctx); err != nil || n != 0 {
				b.Fatal(n, err)
			}
		}
	})
	b.Run("none dead", func(b *testing.B) {
		for b.Loop() {
			if ops, err := s.DeadOps(ctx); err != nil || len(ops) != 0 {
				b.Fatal(ops, err)
			}
		}
	})
	if _, err := s.flushDB.Exec(`UPDATE ops SET state='dead', error_json='{"message":"refused"}' WHERE local_seq <= 3`); err != nil {
		b.Fatal(err)
	}
	b.Run("3 dead", func(b *testing.B) {
		for b.Loop() {
			if ops, err := s.DeadOps(ctx); err != nil || len(ops) != 3 {
				b.Fatal(ops, err)
			}
		}
	})
}
