package join

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
)

// Config is what a join runs with; cmd builds it from the ladder.
type Config struct {
	// URL is the primary (MEMPALACE_REMOTE_URL); Token its bearer source
	// (ladder.TokenSource), never stored.
	URL   string
	Token func() string
	// Child is the local server's argv and ChildEnv its environment (as
	// the edge starts it); ChildStderr gets its log lines.
	Child       []string
	ChildEnv    []string
	ChildStderr io.Writer
	// Palace is the palace directory; Home the user's home (for the
	// ~/.mempalace/knowledge_graph.sqlite3 the server may use, §7.1).
	Palace, Home string
	// Agent, Label and Device give the stamp of --origin-device
	// (Device "": nothing is stamped).
	Agent, Label, Device string
	Timeout              time.Duration
	// StartWait bounds how long the local server may take to start
	// (0: DefaultStartWait; never less than Timeout).
	StartWait time.Duration
	// Lease is the join outbox flusher's lease (0: the outbox's default).
	Lease time.Duration
	// OutboxEnv goes before the `devbox-config edge outbox ... --join`
	// commands the report prints: the variables that find this join's
	// outbox where the join's environment came from a file (e.g.
	// "MEMPALACE_REMOTE_URL=... MEMPALACE_PALACE_PATH=... ").
	OutboxEnv string
	Version   string
	Log       *slog.Logger
}

// DefaultStartWait is Config.StartWait's production default.
const DefaultStartWait = 10 * time.Second

// withDefaults is c with its unset waits at their production defaults.
func (c Config) withDefaults() Config {
	if c.StartWait <= 0 {
		c.StartWait = DefaultStartWait
	}
	c.StartWait = max(c.StartWait, c.Timeout)
	return c
}

// Options are the command's flags.
type Options struct {
	DryRun bool
	Resume bool
	Wings  []string // --wing globs
	// Verify is how many drawers and diaries to compare by content (a
	// seeded sample); All for every one.
	Verify int
	Seed   uint64
	// Stall gives up on a primary that accepts nothing for this long
	// (default 3x the call timeout, at least 30 s).
	Stall    time.Duration
	Progress *Progress
	// batch is how many ids one get_drawers call carries (0: getBatch,
	// MemPalace's cap). A test sets a few to cross a batch's end with a
	// handful of records instead of 501.
	batch int
}

// All verifies every record.
const All = -1

// UsageError is a join that cannot start: no URL, no token, no local
// server, a bad flag (exit status 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usage(format string, a ...any) error { return &UsageError{fmt.Errorf(format, a...)} }

// Excluded names what the join leaves out.
type Excluded struct {
	// Wings policy.json marks local (never sent).
	Wings []string `json:"wings"`
	// Narrowed: replicated wings no --wing glob selects.
	Narrowed []string `json:"not_selected,omitempty"`
	// KnowledgeGraph: policy.json marks the knowledge graph local.
	KnowledgeGraph bool `json:"knowledge_graph,omitempty"`
}

// Report is the join's outcome (--json prints it as one object).
type Report struct {
	Sent    map[string]int `json:"sent"`
	Skipped map[string]int `json:"skipped"`
	// SentQueuedEarlier: records an earlier run queued (and was stopped
	// before sending) that this run sent, and that are none of this run's
	// writes (the local record changed or went, or the flags did). A write
	// of this run that such a record had just put on the primary is in
	// Sent, not Skipped.
	SentQueuedEarlier map[string]int `json:"sent_queued_earlier"`
	// DeletedOnPrimary: records a gateway did not file again because an
	// admin deleted them on the primary since (its trash holds them, not
	// restored): not sent, and no failure.
	DeletedOnPrimary map[string]int `json:"deleted_on_primary"`
	// ReplacedOnPrimary: facts current here whose triple the primary holds
	// closed and replaced by another value current there: join's noted
	// skip (not sent, no mismatch), never counted as already there.
	ReplacedOnPrimary int `json:"replaced_on_primary"`
	// LeftToOriginal: diary entries not sent because this outbox is a
	// copy's and their ops were queued before the copy: the original
	// machine sends them.
	LeftToOriginal int        `json:"left_to_original,omitempty"`
	Excluded       Excluded   `json:"excluded"`
	Verified       int        `json:"verified"`
	Mismatches     []Mismatch `json:"mismatches"`
	Failed         []Failure  `json:"failed"`
	// NotTried: the records the run left queued without trying them, for
	// the reason that ended it (the primary unreachable, or refusing the
	// token; the run stopped), with those waiting only behind such a
	// record; Failed counts them in words, one line for the reason. One an
	// earlier run saw refused is among them when this run did not try it
	// (nor could ask the primary for it). A record behind an op refused or
	// in doubt now is not: Failed names it and the op.
	NotTried int `json:"not_tried"`

	Target string `json:"target"`
	DryRun bool   `json:"dry_run,omitempty"`
	// Manifest: the local records selected, by type (facts split into
	// open and closed), and of them how many a previous run already sent.
	Manifest    map[string]int `json:"manifest"`
	Pending     map[string]int `json:"to_send"`
	FactsSource string         `json:"facts_source,omitempty"`
	VerifySeed  uint64         `json:"verify_seed"`
	Sampled     int            `json:"verify_sampled"`
	// Calls counts the calls made to the primary and the local palace by
	// tool (for calls per record).
	Calls map[string]int `json:"calls"`
	// Seconds is how long each phase took (read, queue, send, verify).
	Seconds    map[string]float64 `json:"seconds"`
	Checkpoint string             `json:"checkpoint,omitempty"`
	Notes      []string           `json:"notes"`
}

// OK reports a join after which everything selected is on the primary
// and what was verified matched.
func (r Report) OK() bool { return len(r.Failed) == 0 && len(r.Mismatches) == 0 }

func newReport(target string) Report {
	r := Report{Sent: map[string]int{}, Skipped: map[string]int{}, SentQueuedEarlier: map[string]int{}, DeletedOnPrimary: map[string]int{}, Manifest: map[string]int{}, Pending: map[string]int{}, Calls: map[string]int{}, Seconds: map[string]float64{}, Target: target, Mismatches: []Mismatch{}, Failed: []Failure{}, Excluded: Excluded{Wings: []string{}}}
	for _, k := range Kinds {
		r.Sent[k], r.Skipped[k], r.SentQueuedEarlier[k], r.DeletedOnPrimary[k], r.Pending[k], r.Manifest[k] = 0, 0, 0, 0, 0, 0
	}
	return r
}

// counter counts calls by tool.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
	side  string
	next  Caller
}

func (c *counter) count(tool string) {
	c.mu.Lock()
	c.calls[c.side+" "+strings.TrimPrefix(tool, "mempalace_")]++
	c.mu.Unlock()
}

func (c *counter) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	c.count(tool)
	return c.next.Call(ctx, tool, args)
}

// countingPrimary is the primary as the flusher sends to it (its writes
// paced by edge.FlushTarget), its calls counted, and when it last
// answered one (answered: unix nanoseconds), which the drain's stall is
// measured from: a send cut unanswered is not the primary accepting.
type countingPrimary struct {
	c        *counter
	p        outbox.Primary
	answered *atomic.Int64
}

func (c countingPrimary) Up() bool { return c.p.Up() }

func (c countingPrimary) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	c.c.count(tool)
	res, err := c.p.Call(ctx, tool, args)
	var rpc *outbox.RPCError
	if err == nil || errors.As(err, &rpc) {
		c.answered.Store(time.Now().UnixNano())
	}
	return res, err
}

// Ledger passes on whether the primary is a gateway with an op-id ledger.
func (c countingPrimary) Ledger(ctx context.Context) (bool, error) {
	lt, ok := c.p.(outbox.LedgerTarget)
	if !ok {
		return false, nil
	}
	return lt.Ledger(ctx)
}

// callerOf is a primary as a Caller (the join's look-ups and
// verification), waiting for up to stall both a gateway's read rate
// (-32029) before a refusal is the call's answer and the primary's
// breaker (tripped by a failed call, as by an answer too large to take)
// before a call it would refuse unsent. Once the run has found the
// primary accepting nothing for stall (a call waited that long for its
// breaker, or the drain gave up: quiet), no call waits for the breaker
// again until the primary is back: the run gives up once, not once a
// phase (attack94 F3: a hung primary held a join twice the stall).
type callerOf struct {
	p     outbox.Primary
	stall time.Duration
	quiet time.Time // since when the primary accepted nothing, as the run found it (zero: it did not)
}

func (c *callerOf) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	began, wait := time.Now(), 20*time.Millisecond
	for {
		up := c.p.Up()
		if up || !c.quiet.IsZero() || time.Since(began) > c.stall {
			switch {
			case up:
				c.quiet = time.Time{}
			case c.quiet.IsZero():
				c.quiet = began
			}
			res, err := c.p.Call(ctx, tool, b)
			var rpc *outbox.RPCError
			if !errors.As(err, &rpc) || rpc.Code != ledger.CodeRateLimited || time.Since(began) > c.stall {
				return res, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Target names a primary in bootstrap.json and the join outbox's file:
// the URL without query, fragment or credentials.
func Target(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// OutboxFile is the join outbox of a target inside <palace>/edge: its own
// file, so the edge's outbox and other targets' joins are untouched.
func OutboxFile(target string) string {
	sum := sha256.Sum256([]byte(target))
	return "join-outbox-" + hex.EncodeToString(sum[:])[:12] + ".sqlite"
}

// Run joins the local palace to the primary, phase by phase (joining).
// The error is a *UsageError when the join could not start; any other
// failure is in the report.
func Run(ctx context.Context, cfg Config, o Options) (Report, error) {
	j, err := start(ctx, cfg, o)
	defer j.close()
	if err != nil {
		return j.rep, err
	}
	for _, phase := range []func(context.Context) *Failure{j.readManifest, j.plan, j.edgeQueued} {
		if f := phase(ctx); f != nil {
			j.rep.Failed = append(j.rep.Failed, *f)
			j.dropStore = j.madeStore // nothing queued: nothing kept
			return j.rep, nil
		}
	}
	if o.DryRun {
		return j.dryRun(ctx), nil
	}
	if f := j.wrongPrimary(ctx); f != nil {
		j.rep.Failed = append(j.rep.Failed, *f)
		j.dropStore = j.madeStore // nothing queued: nothing kept for the wrong URL
		return j.rep, nil
	}
	j.present(ctx)
	j.factsOnPrimary(ctx)
	j.queue(ctx)
	j.drain(ctx)
	j.settle(ctx)
	j.verify(ctx)
	j.checkpoint()
	j.clearStayedLocal()
	return j.rep, nil
}

func hasPalaceFlag(argv []string) bool {
	return slices.ContainsFunc(argv[1:], func(a string) bool { return a == "--palace" || strings.HasPrefix(a, "--palace=") })
}

func recordName(r Record) string {
	switch {
	case r.LocalID != "":
		return r.LocalID
	case r.Kind == Facts:
		return fmt.Sprintf("%s → %s → %s", str(r.Args, "subject"), str(r.Args, "predicate"), str(r.Args, "object"))
	}
	// One a resumed join read back from its outbox: named by what it says.
	text := []rune(cmp.Or(str(r.Args, "content"), str(r.Args, "entry")))
	if len(text) > 40 {
		text = append(text[:40], '…')
	}
	return fmt.Sprintf("%s/%s %q", r.Wing, cmp.Or(str(r.Args, "room"), str(r.Args, "agent_name")), string(text))
}

func kindOfTool(tool string) string {
	switch tool {
	case "mempalace_diary_write":
		return Diaries
	case "mempalace_kg_add", "mempalace_kg_invalidate":
		return Facts
	}
	return Drawers
}

func errText(raw json.RawMessage) string {
	var e struct{ Kind, Message string }
	if json.Unmarshal(raw, &e) != nil || e.Kind == "" {
		return "waiting for the ops before it"
	}
	return e.Kind + ": " + e.Message
}

// failedAs is the kind of an op's last failure, or of an operator's or
// the gateway's record that settled it ("" for none).
func failedAs(op outbox.Op) outbox.Kind {
	var e struct{ Kind string }
	json.Unmarshal(op.Error, &e) // none, or unreadable: ""
	return outbox.Kind(e.Kind)
}

func notes(r Report, noDrawers bool) []string {
	n := []string{}
	if noDrawers {
		n = append(n, "the local palace holds no drawers yet (MemPalace keeps no drawer collection for it and answers its drawer reads with an error): no drawers or diaries to send")
	}
	if r.Manifest[Diaries] > 0 {
		n = append(n, "diary entries replay verbatim: the text is their dedupe key (sha256(entry)[:12]), and their date on the primary is the join date (diary_write stamps the time it runs)")
	}
	if r.FactsSource != "" {
		n = append(n, "facts read by: "+r.FactsSource)
	}
	n = append(n, "join one palace at a time: a diary entry or closed fact that two palaces both hold can land twice if they join concurrently (no server guard, RFC 001 §7.6, §3.2); a copy found after sending is named as a mismatch")
	return n
}
