package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
)

// pacedTarget is the flush target with its writes paced to a gateway's
// write rate once refused for it: every other method is primaryAdapter's.
type pacedTarget struct {
	primaryAdapter
	pace *pacer
}

func (t pacedTarget) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	if !paced(tool) {
		return t.primaryAdapter.Call(ctx, tool, args)
	}
	if err := t.pace.wait(ctx); err != nil {
		return nil, err
	}
	res, err := t.primaryAdapter.Call(ctx, tool, args)
	t.pace.answered(err)
	return res, err
}

// pacer spaces a flush's writes once a gateway refuses one for its write
// rate (-32029, or HTTP 429): the gateway names no rate and no retry time,
// so the gap between writes is found. A refusal after an accepted write
// widens it by a quarter (a refusal right after another doubles it, from
// 1 ms, up to maxGap), and each accepted write narrows it by 1/256: the
// writes go a little under the rate, then a little over it, which spends
// the burst the gateway saved meanwhile, so the flush keeps the rate's
// pace and meets it about once per hundred writes, where each queued
// write, sent as soon as it was due, met it again after its own backoff.
// Never refused, writes go unpaced. Reads are not paced.
type pacer struct {
	mu       sync.Mutex
	gap      time.Duration
	next     time.Time
	accepted bool // a write was accepted since the last refusal
}

const maxGap = 5 * time.Second

// wait holds a write until its turn; ctx ending first is a write not sent.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	at := p.next
	if now := time.Now(); at.Before(now) {
		at = now
	}
	p.next = at.Add(p.gap)
	p.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for its turn under the gateway's write rate: %w", outbox.ErrNotSent, ctx.Err())
	case <-t.C:
		return nil
	}
}

// answered adjusts the gap by a write's answer (err: its failure).
func (p *pacer) answered(err error) {
	var rpc *outbox.RPCError
	var st *outbox.HTTPError
	limited := errors.As(err, &rpc) && rpc.Code == ledger.CodeRateLimited || errors.As(err, &st) && st.Status == 429
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case limited && p.accepted:
		p.gap = min(max(p.gap*5/4, time.Millisecond), maxGap)
	case limited:
		p.gap = min(max(p.gap*2, time.Millisecond), maxGap)
	case err == nil:
		p.gap -= p.gap / 256
	}
	p.accepted = !limited && err == nil
}

// paced reports a tool the gateway counts against the write rate: every
// tool that is not a read (deletes and unknown tools included).
func paced(tool string) bool {
	t, _ := catalogue.Lookup(tool)
	return !t.Reads
}
