package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
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

// bucket is the device's read or write bucket, made at its first use.
func (l *limiters) bucket(d *Device, write bool) *rate.Limiter {
	key, r := d.ID+"/read", cmp.Or(d.ReadRate, 50)
	if write {
		key, r = d.ID+"/write", cmp.Or(d.WriteRate, 10)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*rate.Limiter{}
	}
	lim := l.m[key]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(r), burstOf(d, write))
		l.m[key] = lim
	}
	return lim
}

// allow takes n tokens from the device's read or write bucket at now
// (the server's clock). A write costing more than one (a checkpoint's
// items, at most the burst) passes on one token and takes the rest as
// debt the device's next writes wait out: else it would need the whole
// bucket full, and one write just before it would refuse it. (Two such at once may both pass on the same
// token: the debt is deeper, and the write slot serves them in turn.)
func (l *limiters) allow(d *Device, write bool, n int, now time.Time) bool {
	lim := l.bucket(d, write)
	if n <= 1 {
		return lim.AllowN(now, n)
	}
	if lim.TokensAt(now) < 1 {
		return false
	}
	lim.ReserveN(now, n) // granted: n is at most the burst
	return true
}

// spent reports a device with no token left in its read bucket nor in
// its write bucket at now (the server's clock): any call it sends now is
// refused by its rate.
func (l *limiters) spent(d *Device, now time.Time) bool {
	return l.bucket(d, false).TokensAt(now) < 1 && l.bucket(d, true).TokensAt(now) < 1
}

// maxInFlight is the most /mcp requests one device may have served at
// once: a bound on the connections, bodies and goroutines one device's
// token holds (attack72 F4: a device over its read rate held 50 stalled
// 16 MB uploads, each up to its body deadline). An edge has a few at
// once (an event_wait, a flush's send, the agent's calls).
const maxInFlight = 32

// deviceBodies and gatewayBodies bound the bytes of request bodies and
// upstream answers being read, parsed, filtered and forwarded at once:
// one device's (three whole 16 MiB writes), and every device's together
// (eight). A body costs the gateway some seven times itself in memory
// while it is served (read, parsed, digested, re-encoded, sent:
// BENCHMARKS.md), so 32 of one device's 16 MiB bodies held 3.5 GB
// (attack100 F4); an answer some three times itself (read, filtered,
// written). A body of undeclared length (chunked) counts as MaxBody.
const (
	deviceBodies  = 48 << 20
	gatewayBodies = 128 << 20
)

// smallBytes: a body under it counts in its device's bound only, not in
// every device's, so devices sending big bodies slowly (or writes queued
// for the write slot) cannot refuse every other device's reads, pings
// and event waits (review32 R4); an answer's first smallBytes count in
// neither, so a write's answer (a few hundred bytes) is never cut. Every
// read and protocol message, an event, and a drawer's or diary entry's
// text as an edge sends it (100,000 characters, at most 400 KB of UTF-8)
// are under it; an artifact, a checkpoint's batch, a join's bulk are
// not. One device's small bodies still hold at most deviceBodies, its
// answers' free parts 32 MiB (maxInFlight of them).
const smallBytes = 1 << 20

// retryAfter is the Retry-After of an in_flight refusal, in seconds: a
// request being served ends within seconds, mostly.
const retryAfter = "2"

// inFlight counts each device's requests being served, and the bytes
// of their bodies and answers.
type inFlight struct {
	mu    sync.Mutex
	n     map[string]int   // requests, by device
	bytes map[string]int64 // their bytes, by device
	total int64            // every device's bytes (small bodies left out)
	// device, gateway: the bounds on bytes (0: deviceBodies,
	// gatewayBodies); tests set less.
	device, gateway int64
}

// held is one request's count in inFlight: its body's bytes and its
// answers' (add), given back together when it ends (release).
type held struct {
	f           *inFlight
	device      string
	own, shared int64 // counted in the device's bound; in every device's
	released    bool  // its request ended: an answer read later is not counted
}

// take counts one more of device's, whose body is size bytes, if that
// keeps the device within maxInFlight and its bytes and every device's
// within their bounds; release must follow a nil refusal. Else it says
// which bound refused it.
func (f *inFlight) take(device string, size int64) (h *held, refusal string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[device] >= maxInFlight {
		return nil, fmt.Sprintf("%s has %d requests being served, the most one device may at once", device, maxInFlight)
	}
	shared := size
	if size < smallBytes {
		shared = 0
	}
	if refusal := f.overLocked(device, size, shared, "this one's body"); refusal != "" {
		return nil, refusal
	}
	if f.n == nil {
		f.n, f.bytes = map[string]int{}, map[string]int64{}
	}
	f.n[device]++
	h = &held{f: f, device: device}
	h.countLocked(size, shared)
	return h, ""
}

// overLocked says which bound own more bytes of device's, shared of them
// in every device's, would pass ("" none); what names them.
func (f *inFlight) overLocked(device string, own, shared int64, what string) string {
	perDevice, all := cmp.Or(f.device, deviceBodies), cmp.Or(f.gateway, gatewayBodies)
	switch {
	case f.bytes[device]+own > perDevice:
		return fmt.Sprintf("%s has %d bytes of request bodies and upstream answers being served, and %s %d would pass the %d (%d MiB) one device's may hold at once", device, f.bytes[device], what, own, perDevice, perDevice>>20)
	case shared > 0 && f.total+shared > all:
		return fmt.Sprintf("the gateway holds %d bytes of request bodies and upstream answers being served (every device's), and %s %d would pass the %d (%d MiB) it holds at once", f.total, what, shared, all, all>>20)
	}
	return ""
}

func (h *held) countLocked(own, shared int64) {
	h.own, h.shared = h.own+own, h.shared+shared
	h.f.bytes[h.device] += own
	h.f.total += shared
}

// add counts n more bytes of an upstream answer being read for the
// request, in both bounds, or says which it would pass ("" none).
func (h *held) add(n int64) string {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if h.released {
		return "" // an answer read after its request ended is not held by it
	}
	if refusal := h.f.overLocked(h.device, n, n, "this request's upstream answer's next"); refusal != "" {
		return refusal
	}
	h.countLocked(n, n)
	return ""
}

// release gives back the request's place and bytes.
func (h *held) release() {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	h.released = true
	f.total -= h.shared
	if f.bytes[h.device] -= h.own; f.bytes[h.device] == 0 {
		delete(f.bytes, h.device)
	}
	if f.n[h.device]--; f.n[h.device] == 0 {
		delete(f.n, h.device)
	}
}

// burstOf is the device's read or write burst: 100 reads, 20 writes, or
// a second's worth of its rate when that is more.
func burstOf(d *Device, write bool) int {
	if write {
		return max(20, int(cmp.Or(d.WriteRate, 10)))
	}
	return max(100, int(cmp.Or(d.ReadRate, 50)))
}

// batch is the items of a checkpoint from a device that is not admin
// (none for any other write): each costs a write against the device's
// write rate, at most its burst, so a batch costs what its parts would and
// a checkpoint of more items still passes, the device's next writes
// waiting for the refill (attack69 F3: one checkpoint of 150 items held
// the primary's write slot for minutes as one write); maxBatchBytes
// bounds their content.
func batch(d *Device, req *rpcRequest) []any {
	if t, _ := catalogue.Lookup(req.Tool); d.Admin || t.Name != "checkpoint" {
		return nil
	}
	items, _ := req.Args["items"].([]any)
	return items
}

// maxBatchBytes bounds the content one checkpoint of a device that is not
// admin files: the primary's single write slot is held while its items are
// embedded (about 8 s for 2 MB on the testbed's instant embedder), so one
// call holds it that long at most (attack69 F3: 13.7 MB held it over 2
// minutes). A harness checkpoint is far smaller.
const maxBatchBytes = 2 << 20

// contentBytes is the bytes of content items carry.
func contentBytes(items []any) int {
	n := 0
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			c, _ := m["content"].(string)
			n += len(c)
		}
	}
	return n
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
	holder  string // the device whose write holds the slot
	waiting map[string][]chan struct{}
	order   []string // devices with waiters, in turn
}

func newWriteQueue(share int, wait time.Duration) *writeQueue {
	return &writeQueue{share: share, wait: wait, waiting: map[string][]chan struct{}{}}
}

// acquire takes the slot for device, or says why not (a queueRefusal):
// the device's share of the queue is full, the wait ran out with the
// slot held by another device's write (or by this device's own), or ctx
// ended (the device hung up). release must be called after a nil.
func (q *writeQueue) acquire(ctx context.Context, device string) error {
	q.mu.Lock()
	if !q.busy && len(q.order) == 0 {
		q.busy, q.holder = true, device
		q.mu.Unlock()
		return nil
	}
	if len(q.waiting[device]) >= q.share {
		q.mu.Unlock()
		return &queueRefusal{fmt.Sprintf("this device has %d writes waiting for the primary's single write slot already (its share of the write queue); send it again once they are through", q.share)}
	}
	ch := make(chan struct{})
	if len(q.waiting[device]) == 0 {
		q.order = append(q.order, device)
	}
	q.waiting[device] = append(q.waiting[device], ch)
	q.mu.Unlock()

	wctx, cancel := context.WithTimeout(ctx, q.wait)
	defer cancel()
	select {
	case <-ch:
		return nil
	case <-wctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.waiting[device], ch); i < 0 {
		q.releaseLocked() // granted while giving up: pass the slot on
	} else if q.waiting[device] = slices.Delete(q.waiting[device], i, i+1); len(q.waiting[device]) == 0 { // still waiting: leave the queue
		delete(q.waiting, device)
		q.order = slices.DeleteFunc(q.order, func(d string) bool { return d == device })
	}
	whose := "another device's long write"
	switch {
	case ctx.Err() != nil:
		return &queueRefusal{"the device hung up while its write waited for the primary's write slot"}
	case q.holder == device:
		whose = "this device's own earlier write"
	}
	return &queueRefusal{fmt.Sprintf("the primary's single write slot stayed held by %s for %s, longer than a write waits for it", whose, q.wait)}
}

// queueRefusal is why a write got no write slot: it was not sent.
type queueRefusal struct{ why string }

func (e *queueRefusal) Error() string {
	return "devbox-config gateway: rate limited: " + e.why + "; nothing was written: send it again later"
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
	q.holder = device
	close(next) // busy stays true: the slot is handed over
}
