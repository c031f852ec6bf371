package mailbox

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// benchLog is a busy log: n asks to me, three quarters answered (half by
// event_ack, half by correlation), plus n/10 broadcasts.
func benchLog(n int) []Event {
	var log []Event
	seq := int64(0)
	next := func() int64 { seq++; return seq }
	for i := 0; i < n; i++ {
		log = append(log, ev(next(), fmt.Sprintf("a%d", i), "pi@laptop", me, fmt.Sprintf("c%d", i), "open", ""))
		if i%10 == 0 {
			log = append(log, ev(next(), fmt.Sprintf("b%d", i), "pi@laptop", "*", "", "open", ""))
		}
	}
	for i := 0; i < n; i++ {
		switch i % 4 {
		case 0:
		case 1:
			log = append(log, ev(next(), fmt.Sprintf("k%d", i), me, "pi@laptop", fmt.Sprintf("c%d", i), "applied", fmt.Sprintf("a%d", i)))
		default:
			log = append(log, ev(next(), fmt.Sprintf("r%d", i), me, "pi@laptop", fmt.Sprintf("c%d", i), "applied", ""))
		}
	}
	return log
}

var benchSizes = []int{1000, 10000}

// BenchmarkDerive: the owed set of a log of n asks (1.75 n events).
func BenchmarkDerive(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("asks=%d", n), func(b *testing.B) {
			log := benchLog(n)
			for b.Loop() {
				if got := Derive(log, me); len(got) != n/4 {
					b.Fatalf("%d owed", len(got))
				}
			}
		})
	}
}

// BenchmarkMailboxDegraded: the answer with the primary down (it refuses
// at once, as the edge's open breaker does), from a last view of the same
// log, with one pending reply. Issue 17 asks for under 50 ms.
func BenchmarkMailboxDegraded(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("asks=%d", n), func(b *testing.B) {
			src := &fakeSource{log: benchLog(n)}
			m := &Mailbox{Src: src, Wait: 40 * time.Millisecond}
			ctx := context.Background()
			if _, err := m.Owed(ctx, me, "", 0, nil); err != nil {
				b.Fatal(err)
			}
			src.down.Store(true)
			pending := []map[string]any{{"event_id": "a0", "from_agent": me, "status": "applied"}}
			for b.Loop() {
				r, err := m.Owed(ctx, me, "", DefaultLimit, pending)
				if err != nil || !r.Degraded || r.Count+r.More != n/4-1 {
					b.Fatalf("%+v %v", r.Count, err)
				}
			}
		})
	}
}
