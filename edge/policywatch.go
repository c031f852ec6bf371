package edge

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// policyWatch is the replication policy as the running edge knows it: read
// at start and again whenever policy.json changes (a stat per write). A
// policy that does not parse replicates nothing and loses nothing: writes
// are queued held (outbox.Held), and released (sent, or kept local, as
// the policy then says) once it parses.
type policyWatch struct {
	dir string

	mu    sync.Mutex
	pol   *Policy
	err   error // the file could not be read or parsed
	stamp fileStamp
}

// fileStamp is what tells a changed file: its size and modification time
// (and whether it exists).
type fileStamp struct {
	exists bool
	size   int64
	mod    time.Time
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{exists: true, size: fi.Size(), mod: fi.ModTime()}
}

// current is the policy (nil and the error while it does not parse),
// re-read first if the file changed; changed reports that it now parses
// after it did not (held ops can be released).
func (w *policyWatch) current() (pol *Policy, err error, nowParses bool) {
	st := stampOf(filepath.Join(w.dir, PolicyFile))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pol != nil || w.err != nil {
		if st == w.stamp {
			return w.pol, w.err, false
		}
	}
	was := w.err
	w.stamp = st
	w.pol, w.err = LoadPolicy(w.dir)
	return w.pol, w.err, w.err == nil && was != nil
}

// ReleaseHeld settles the ops held while the policy did not parse, now
// that pol parses: each is queued with the payload the policy makes of it
// (a checkpoint cut to its replicated items) or, if the policy keeps its
// wings local, marked done as local. It returns how many it queued and
// kept local. `edge flush` and the edge both call it.
func ReleaseHeld(ctx context.Context, s *outbox.Store, pol *Policy, stamp string) (queued, local int, err error) {
	held, err := s.List(ctx, 1<<30, outbox.Held)
	if err != nil {
		return 0, 0, err
	}
	for _, op := range held {
		rec, _ := catalogue.Lookup(op.Tool)
		var args map[string]any
		if json.Unmarshal(op.Payload, &args) != nil {
			args = map[string]any{} // the local palace took it, so it parses; if not, its wing is ""
		}
		payload, _, ok := decide(pol, rec, args, op.Payload, op.Wing, stamp)
		if err := s.Release(ctx, op, payload, ok); err != nil {
			return queued, local, err
		}
		if ok {
			queued++
		} else {
			local++
		}
	}
	return queued, local, nil
}

// currentPolicy is the policy as it now reads (re-read if the file
// changed); the moment it parses again, the ops held meanwhile are
// released.
func (e *Edge) currentPolicy(ctx context.Context) (*Policy, error) {
	pol, err, nowParses := e.pw.current()
	if nowParses && e.outbox != nil {
		e.release(ctx, pol)
	}
	return pol, err
}

// release settles the held ops by pol (ReleaseHeld), logging the outcome.
func (e *Edge) release(ctx context.Context, pol *Policy) {
	q, l, err := ReleaseHeld(ctx, e.outbox, pol, e.cfg.Stamp())
	switch {
	case err != nil:
		e.log.Error("writes held while the policy did not parse stay held", "err", err)
	case q+l > 0:
		e.log.Info("the replication policy parses: writes held meanwhile are released", "queued", q, "kept local", l)
	}
}
