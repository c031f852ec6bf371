package gateway

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiters holds each device's read and write token buckets.
type limiters struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// reset drops every bucket (new rates apply at once).
func (l *limiters) reset() {
	l.mu.Lock()
	l.m = map[string]*rate.Limiter{}
	l.mu.Unlock()
}

// allow takes one token from the device's read or write bucket.
func (l *limiters) allow(d *Device, write bool) bool {
	key, r, burst := d.ID+"/read", cmp.Or(d.ReadRate, 50), 100
	if write {
		key, r, burst = d.ID+"/write", cmp.Or(d.WriteRate, 10), 20
	}
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*rate.Limiter{}
	}
	lim := l.m[key]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(r), max(burst, int(r)))
		l.m[key] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

// writeQueue lets one write at a time through to the single-writer
// primary. Waiting writes are queued per device, each device at most
// share of them, and the slot passes round-robin between devices: one
// device's burst of slow writes fills only its own share, and every other
// device's next write is served after at most one write of each device
// ahead of it.
type writeQueue struct {
	share int
	wait  time.Duration

	mu      sync.Mutex
	busy    bool
	waiting map[string][]chan struct{}
	order   []string // devices with waiters, in turn
}

func newWriteQueue(share int, wait time.Duration) *writeQueue {
	return &writeQueue{share: share, wait: wait, waiting: map[string][]chan struct{}{}}
}

// acquire takes the slot for device, or reports false when the device's
// share of the queue is full or the wait ran out. release must be called
// after a true.
func (q *writeQueue) acquire(ctx context.Context, device string) bool {
	q.mu.Lock()
	if !q.busy && len(q.order) == 0 {
		q.busy = true
		q.mu.Unlock()
		return true
	}
	if len(q.waiting[device]) >= q.share {
		q.mu.Unlock()
		return false
	}
	ch := make(chan struct{})
	if len(q.waiting[device]) == 0 {
		q.order = append(q.order, device)
	}
	q.waiting[device] = append(q.waiting[device], ch)
	q.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, q.wait)
	defer cancel()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.waiting[device], ch); i >= 0 { // still waiting: leave the queue
		if q.waiting[device] = slices.Delete(q.waiting[device], i, i+1); len(q.waiting[device]) == 0 {
			delete(q.waiting, device)
			q.order = slices.DeleteFunc(q.order, func(d string) bool { return d == device })
		}
		return false
	}
	// Granted while giving up: pass the slot on.
	q.releaseLocked()
	return false
}

// release passes the slot to the next device in turn (or frees it).
func (q *writeQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked()
}

func (q *writeQueue) releaseLocked() {
	if len(q.order) == 0 {
		q.busy = false
		return
	}
	device := q.order[0]
	q.order = q.order[1:]
	ws := q.waiting[device]
	next := ws[0]
	if len(ws) == 1 {
		delete(q.waiting, device)
	} else {
		q.waiting[device] = ws[1:]
		q.order = append(q.order, device) // its next write waits for the others' turns
	}
	close(next) // busy stays true: the slot is handed over
}
