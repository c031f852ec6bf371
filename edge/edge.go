package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/palacefiles"
)

// Edge is one running edge: the agent-facing server and its supervisors.
type Edge struct {
	cfg         Config
	log         *slog.Logger
	server      *mcp.Server
	implJSON    []byte
	child       *Child   // the local palace server's supervisor
	primary     *Primary // the primary's client; nil in pass-through
	localServer localPalace
	remote      primaryPalace // nil in pass-through
	outbox      *outbox.Store
	obErr       error
	pw          *policyWatch // the replication policy, re-read when it changes

	mu            sync.Mutex
	regMu         sync.Mutex            // serializes addTools, so "listed" means AddTool is done
	listedFrom    map[string]toolSource // a listed tool's definition, by where it came from (registry.go)
	childTools    map[string]*mcp.Tool
	primaryTools  map[string]*mcp.Tool
	toolsReady    chan struct{}
	readyOnce     sync.Once
	childListed   bool          // the child's tool list is known (live or cached)
	childDown     atomic.Bool   // the local palace server failed to start
	primaryListed atomic.Bool   // the mailbox listed the primary's tools (mailbox.go)
	childKnown    chan struct{} // closed once the child listed its tools or failed to start
	keptUnapplied chan struct{} // a delete kept without the local answer: watchUnapplied sends it again
	primaryUp     chan struct{} // the primary answered with the token (resume): watchUnapplied reads the held notes of dropped edits again
	theirsFirst   chan struct{} // closed once watchUnapplied's first pass over the notes of dropped edits ended (or was given up on): tool calls wait for it (theirs.go); nil: none runs
	theirsOnce    sync.Once
	// took is the writer of each drawer whose local copy holds a text
	// taken from the primary after a drop (outbox.Took), by drawer id,
	// as takeTheirs last read it (nil: not read yet); this edge's own
	// edit of one takes it out at once (ownAgain).
	took atomic.Pointer[map[string]origin.Origin]
	// untaken is each drawer whose dropped edit's note (outbox.Theirs)
	// waits for its take, to the base of that edit's text, as takeTheirs
	// last read the notes (nil: not read yet): while the local text is
	// still that edit's (isUntaken), its reads ask the primary first, and
	// a local answer of it is marked (untakenRead).
	untaken atomic.Pointer[map[string]string]
	// resending: kept deletes are read and sent to the local palace
	// again (Lock) never while a write is there (RLock), whose answer's
	// lift may take them back (localdelete.go)
	resending sync.RWMutex
	// firstRuns counts the local palaces started that read what they get
	// first (firstCalls, under firstMu): a write cut after its call was
	// sent, noted once one did, is sent by keepCut itself (cutwrite.go).
	firstMu     sync.Mutex
	firstRuns   uint64
	childOnce   sync.Once
	unlisted    map[string]bool // tools only the primary lists, unknown to the catalogue (logged once)
	agent       *mcp.ServerSession
	initialized atomic.Bool   // the agent finished initialize: the fast lane is open
	initDone    chan struct{} // closed when initialized is set
	initOnce    sync.Once
	mismatch    string                          // embedder canary: the mismatch recorded ("" = none, or cleared by distances that agree since)
	box         *mailbox.Mailbox                // the coordination mailbox; nil in pass-through
	wk          *wake                           // the owed asks told without a tool call; nil in pass-through
	keptDevice  atomic.Pointer[deviceinfo.Info] // the device header an earlier run last heard (device.go)
	stopping    atomic.Bool                     // Serve's context ended: new requests are refused
	run         context.Context                 // ends when the edge stops; the SDK's handlers end with it
	halt        context.Context                 // ends at the stop's signal (beforeStop); nil outside Serve
	writes      sentWrites                      // writes sent to the local palace, not yet answered and queued (sentwrite.go)
	dead        deadNews                        // the dead ops the session was told of (deadnote.go)
	stayed      stayedLocal                     // writes the outbox could not record, not yet counted in it (replicate.go)
	side        sync.WaitGroup                  // the agent's level passed on to the child: Serve waits for it
	// beforeSend, if set (tests), runs in a write between its intent and
	// its send to the local palace, on the call's context.
	beforeSend func(context.Context)
}

// New builds an edge from its configuration; Serve runs it.
func New(cfg Config) *Edge {
	cfg = cfg.withDefaults()
	e := &Edge{cfg: cfg, log: cfg.Log, listedFrom: map[string]toolSource{}, unlisted: map[string]bool{}, childTools: map[string]*mcp.Tool{}, primaryTools: map[string]*mcp.Tool{}, toolsReady: make(chan struct{}), childKnown: make(chan struct{}), keptUnapplied: make(chan struct{}, 1), primaryUp: make(chan struct{}, 1), initDone: make(chan struct{})}
	e.dead.seen.Store(-1) // not looked up yet: the first answer (or the session's start) does
	impl := &mcp.Implementation{Name: "mempalace-edge", Title: "MemPalace (devbox-config edge)", Version: cfg.Version}
	e.implJSON, _ = json.Marshal(impl) // for stateless answers (statelessResult)
	opts := &mcp.ServerOptions{
		InitializedHandler: func(ctx context.Context, r *mcp.InitializedRequest) {
			e.setAgent(r.Session, true)
			e.initialized.Store(true)
			e.initOnce.Do(func() { close(e.initDone) })
		},
		// tools and logging; with a primary, the mailbox's prompt and resource too
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}},
	}
	if !cfg.PassThrough() {
		opts.Capabilities.Prompts, opts.Capabilities.Resources = &mcp.PromptCapabilities{}, &mcp.ResourceCapabilities{Subscribe: true}
		opts.SubscribeHandler = func(_ context.Context, r *mcp.SubscribeRequest) error { e.subscribe(r.Params.URI, true); return nil }
		opts.UnsubscribeHandler = func(_ context.Context, r *mcp.UnsubscribeRequest) error { e.subscribe(r.Params.URI, false); return nil }
	}
	e.server = mcp.NewServer(impl, opts)
	e.server.AddReceivingMiddleware(e.receive)
	e.child = NewChild(cfg.Child, cfg.ChildEnv, cfg.Log, ChildOptions{
		OnTools:    func(t []*mcp.Tool) { e.addTools(t, false) },
		OnLog:      e.forwardLog,
		OnProgress: e.forwardProgress,
		Stderr:     cfg.ChildStderr,
		Version:    cfg.Version,
		First:      e.firstCalls, // localdelete.go
		OnDown:     e.localServerDown,
		Wait:       cfg.CallTimeout,
		exitWait:   cfg.childExitWait,
		maxMessage: cfg.childMaxMessage,
	})
	e.localServer = e.child
	if !cfg.PassThrough() {
		e.addMailbox()
	}
	return e
}

// receive is the agent's requests' middleware. tools/list and tools/call
// wait (bounded) for the first tool list, so an agent that asks at once
// gets the palace's tools rather than none or "unknown tool"; initialize
// is never held up, and a session's start carries the dead writes and
// owed asks (wake.go).
func (e *Edge) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if e.run != nil {
			// The SDK's contexts never end: this one ends when the edge
			// stops, so a call still running then is answered.
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(e.run, cancel)()
		}
		if method == "tools/list" || method == "tools/call" {
			e.waitTools(ctx)
		}
		res, err := next(ctx, method, req)
		if e.run != nil && e.run.Err() != nil && ctx.Err() != nil && !notApplied(err) {
			return nil, e.errStopping(requestWrites(req))
		}
		if err == nil && (e.wk != nil || e.outbox != nil) {
			switch r := res.(type) { // the session starts: dead writes, owed asks (wake.go)
			case *mcp.InitializeResult:
				r.Instructions = e.sessionInstructions(ctx)
			case *mcp.DiscoverResult: // the stateless protocol's (2026-07-28)
				r.Instructions = e.sessionInstructions(ctx)
			}
		}
		if method == "logging/setLevel" && err == nil {
			// The agent's level applies to the child too, so its log
			// messages are produced and pass through.
			if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok && e.run != nil {
				e.side.Go(func() { e.child.SetLoggingLevel(e.run, p) }) // off the reader, until the edge stops
			}
		}
		return res, err
	}
}

// announcePassThrough says on stderr that the edge has no primary: at
// INFO in R1, at WARN where it was meant to replicate (Config.OptedIn), a
// harness that lost the variables: nothing queues these writes.
func (e *Edge) announcePassThrough() {
	if e.cfg.OptedIn == "" {
		e.log.Info("no MEMPALACE_REMOTE_URL: transparent pass-through to the local palace (no files, no network)")
		return
	}
	e.log.Warn("no MEMPALACE_REMOTE_URL, although " + e.cfg.OptedIn + ": this session's writes go to the local palace only and will not be replicated, not even later (fix: restart the harness with the MEMPALACE_* variables of .env in its environment; to send what this session wrote, run `devbox-config join`)")
}

// Serve runs the edge on an agent connection until the agent closes it
// or ctx ends. ctx ending (SIGTERM, SIGINT) stops the edge in order with
// the agent's input still open (stopInOrder); what the edge runs lives on
// a context of its own, which ends only once the calls in flight had
// their grace.
func (e *Edge) Serve(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	signalled := ctx.Done()
	halt, haltNow := context.WithCancelCause(ctx) // a signal, or the end of input past its wait (drain)
	defer haltNow(nil)
	e.halt = halt
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	e.run = ctx
	// The flusher stops at a signal already: its send under way has its
	// grace alongside the calls', within the one stop grace.
	flushCtx, haltFlush := context.WithCancel(ctx)
	defer haltFlush()
	var wg sync.WaitGroup
	if e.cfg.PassThrough() {
		e.announcePassThrough()
	} else {
		e.start(ctx, flushCtx, &wg)
	}
	wg.Add(1)
	go func() { defer wg.Done(); e.child.Run(ctx) }()

	pending := wire.NewPending()
	sw := &wire.SyncWriter{W: out, Pending: pending}
	lane := newFastLane(ctx, e, sw)
	intercept := func(line []byte) bool { return e.refuse(sw, line) || lane.intercept(line) }
	in = wire.GuardInput(in, sw, e.log, intercept, pending, func() { e.drain(ctx, sw, haltNow, cancel) })
	ss, err := e.server.Connect(ctx, &mcp.IOTransport{Reader: in, Writer: sw, MaxLineLength: wire.MaxMessage + 1}, nil)
	if err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("agent connection: %w", err)
	}
	e.setAgent(ss, true)
	waited := make(chan error, 1)
	go func() { waited <- ss.Wait() }() // received below, before Serve returns
	select {
	case err = <-waited:
		// The end of input: no SIGKILL follows, so a write at the local
		// palace gets the write grace to be settled by its own answer
		// (refused: never sent; a diary entry's local id noted).
		e.waitWrites(context.Background(), e.cfg.WriteGrace)
		stopped(cancel, &wg, lane)
	case <-signalled:
		haltFlush()
		e.stopInOrder(pending)
		stopped(cancel, &wg, lane) // the calls still running are answered errStopping
		// Closing the SDK's session waits for its handlers' answers. It
		// ends without waiting for the agent's input: the SDK's reader of
		// it stays blocked in a read that nothing can interrupt (a pipe on
		// stdin), and is abandoned when the process exits.
		ss.Close()
		err = <-waited
	}
	e.side.Wait() // its context, the run's, ended above
	e.closeRemote()
	return err
}

// stopped ends the run (cancel) and waits for what Serve started (wg)
// and the fast lane: the local palace stops, and its reader and the
// lane write every answer they owed.
func stopped(cancel context.CancelFunc, wg *sync.WaitGroup, lane *fastLane) {
	cancel()
	wg.Wait()
	lane.wg.Wait()
}

// closeRemote lets go of the primary's connections and the outbox once
// everything that used them has stopped.
func (e *Edge) closeRemote() {
	if e.primary != nil {
		e.primary.Close()
	}
	if err := e.recordStayed(); err != nil {
		e.log.Error("writes the local palace took that the outbox could not record are not recorded for edge status and doctor either (their record file refused them: a read-only mount, a full copy-on-write disk), and their count is lost with this stop: nothing sends them to the primary but `devbox-config join` (`--dry-run` first shows what the primary lacks)", "err", err)
	}
	if e.outbox != nil {
		if err := e.outbox.Close(); err != nil {
			e.log.Warn("outbox not closed cleanly", "err", err)
		}
	}
}

// errInputClosed is the halt's cause when the agent closed its input
// and calls were still running past the wait for them (drain).
var errInputClosed = errors.New("the agent closed its input")

// stopCause says why the edge stops, in its answers.
func (e *Edge) stopCause() string {
	if e.halt != nil && errors.Is(context.Cause(e.halt), errInputClosed) {
		return "the agent closed its input, and the calls still running were stopped"
	}
	return "SIGTERM or SIGINT"
}

// errStopping answers a call the edge stopped before it finished, and a
// request that came after the signal: for a write, maybe applied; a read
// changed nothing.
func (e *Edge) errStopping(write bool) *jsonrpc.Error {
	what := "the request was not finished; it is a read, which changes nothing: ask again once the edge is back"
	if write {
		what = "the request was not finished, and a write may or may not have been applied"
	}
	return &jsonrpc.Error{Code: -32000, Message: "the MemPalace edge is stopping (" + e.stopCause() + "): " + what}
}

// appliedFalse is errNotApplied's data.
var appliedFalse = json.RawMessage(`{"applied":false}`)

// errNotApplied answers a write the edge did not send to the local palace
// before it stopped (its turn, or its look-up there, behind a slow call,
// was cut by the stop): nothing of it is applied or kept, so the agent
// may ask again.
func (e *Edge) errNotApplied() *jsonrpc.Error {
	return &jsonrpc.Error{Code: -32000, Message: "the MemPalace edge is stopping (" + e.stopCause() + "): the request was NOT applied (the edge stopped before it reached the local palace, behind a slow call); nothing was written or deleted: ask again once the edge is back", Data: appliedFalse}
}

// notApplied reports that err is errNotApplied's.
func notApplied(err error) bool {
	var rpcErr *jsonrpc.Error
	return errors.As(err, &rpcErr) && bytes.Equal(rpcErr.Data, appliedFalse)
}

// stopInOrder begins the stop on a signal: new requests are refused
// (refuse), and the calls in flight and the writes at the local palace
// have StopGrace, together, to finish. A write the local palace has not
// answered by then is given up: it was in the outbox before it was sent,
// so none is lost, and a container stop's SIGKILL (10 s after its
// SIGTERM) finds the edge gone.
func (e *Edge) stopInOrder(pending *wire.Pending) {
	e.stopping.Store(true)
	e.log.Info("signal: stopping: new requests are refused; the calls in flight have the grace to finish", "in_flight", pending.Len(), "grace", e.cfg.StopGrace)
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.StopGrace)
	defer cancel()
	if n, err := pending.Wait(ctx); err != nil {
		e.log.Warn("stopping: calls still in flight after the grace are answered with an error", "in_flight", n)
	}
	e.waitWrites(ctx, e.cfg.StopGrace) // what is left of the grace
}

// refuse answers a request from the agent with errStopping once the edge
// is stopping, and reports whether it did; anything else goes on.
func (e *Edge) refuse(w io.Writer, line []byte) bool {
	if !e.stopping.Load() {
		return false
	}
	f := gjson.GetManyBytes(line, "method", "id")
	if f[0].Type != gjson.String || f[1].Type != gjson.Number && f[1].Type != gjson.String {
		return false // a notification or an answer
	}
	w.Write(errorLine([]byte(f[1].Raw), e.errStopping(true))) // an agent that stopped reading: nothing to tell
	return true
}

// errorLine is the agent's answer to request id: rpcErr.
func errorLine(id []byte, rpcErr *jsonrpc.Error) []byte {
	b, _ := json.Marshal(rpcErr) // a code, a message, raw data: it encodes
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":` + string(b) + "}\n")
}

// drainGrace is how long after the call timeout the end of the agent's
// input still waits: time for a call that timed out to be answered so.
const drainGrace = time.Second

// drain runs when the agent closes its input (a pipe of requests and EOF
// is a complete conversation): every request already read is answered
// before the session ends (the SDK writes nothing after). It waits at
// most the call timeout (plus drainGrace), and ToolsWait more while the
// local palace has not listed its tools yet (a slow start), so a hung
// child or primary cannot keep the edge running. Past that the edge
// stops as at a signal (halt, then stop: the run's context), its answers
// naming the closed input: a write still in line NOT applied, one at the
// local palace settled by its answer within the write grace, the rest
// stopped; a request still unanswered after StopGrace more is answered
// here, as stopped (answerOwed), since the SDK closes the agent's output
// once it sees the end.
func (e *Edge) drain(ctx context.Context, out *wire.SyncWriter, halt context.CancelCauseFunc, stop func()) {
	pending := out.Pending
	if pending.Len() == 0 {
		return
	}
	e.log.Debug("agent closed its input; answering the requests already read", "pending", pending.Len())
	limit := e.cfg.CallTimeout + drainGrace
	select {
	case <-e.toolsReady:
	default: // requests may still be waiting for the first tool list
		limit += e.cfg.ToolsWait
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	n, err := pending.Wait(wctx)
	if err == nil {
		return
	}
	e.log.Warn("agent closed its input; the calls still running are stopped: writes not yet at the local palace are answered as not applied, those at it have the write grace, the rest are answered as stopped", "unanswered", n, "grace", e.cfg.WriteGrace)
	e.stopping.Store(true)
	halt(errInputClosed)
	e.waitWrites(context.Background(), e.cfg.WriteGrace)
	stop()
	last, cancelLast := context.WithTimeout(context.Background(), e.cfg.StopGrace)
	defer cancelLast()
	if n, err := pending.Wait(last); err != nil {
		e.log.Error("agent closed its input; requests still unanswered after the stop are answered as stopped (a write: may or may not have been applied)", "unanswered", n, "err", err)
		e.answerOwed(out)
	}
}

// answerOwed answers each request still pending, at the very end, as
// stopped (a write: may or may not have been applied); an answer of its
// own that comes later is not written (wire.Pending.Owed).
func (e *Edge) answerOwed(out *wire.SyncWriter) {
	for _, r := range out.Pending.Owed() {
		out.Write(errorLine(r.ID, e.errStopping(r.Tool != "" && toolWrites(r.Tool)))) // an agent that stopped reading: nothing to tell
	}
}

// requestWrites reports a request that may write: a tools/call of a tool
// the catalogue does not know as a read (the agent's words for a stopped
// call say so).
func requestWrites(req mcp.Request) bool {
	r, ok := req.(*mcp.CallToolRequest)
	return ok && r.Params != nil && toolWrites(r.Params.Name)
}

// toolWrites reports a tool that may write: all but the catalogue's reads
// and the edge's own mailbox tool (a tool the catalogue does not know is a
// write).
func toolWrites(name string) bool {
	t, _ := catalogue.Lookup(name)
	return writes(t, name)
}

// writes is toolWrites of t, the catalogue's record of name, already
// looked up.
func writes(t catalogue.Tool, name string) bool { return !t.Reads && name != mailbox.ToolName }

// start brings up the edge-mode parts: state dir, policy, tool cache,
// outbox and flusher (which runs until flushCtx ends), the primary
// supervisor.
func (e *Edge) start(ctx, flushCtx context.Context, wg *sync.WaitGroup) {
	e.openState(ctx)
	if other := palacefiles.SharedParent(e.cfg.Palace); other != "" {
		e.log.Warn("the palace shares its parent directory with another palace: MemPalace keeps tunnels.json there, so this edge lists that palace's tunnels (any wing's, any writer's) as this device's own; give the palace a directory of its own (devbox-config doctor says how)", "palace", e.cfg.Palace, "other", other)
	}
	e.primary = NewPrimary(e.cfg.PrimaryURL, e.cfg.Token, e.log, PrimaryOptions{
		Timeout:    e.cfg.CallTimeout,
		AskTimeout: e.cfg.GrantAsk,
		Probe:      e.cfg.Probe,
		Version:    e.cfg.Version,
		maxAnswer:  e.cfg.primaryMaxAnswer,
		OnUp:       e.resume,
		OnTools:    func(t []*mcp.Tool) { e.addTools(t, true); e.keepListParams(t) },
		OnDevice:   e.keepDevice,
		OnLedger: func(on bool) {
			if err := outbox.RecordProtection(e.outbox, on); err != nil {
				e.log.Warn("the primary's protection not recorded (edge status shows the last one)", "err", err)
			}
		},
	})
	e.remote = e.primary
	if e.wk != nil {
		e.loadOwed(ctx)
		wg.Add(1)
		go func() { defer wg.Done(); e.watchOwed(ctx) }()
	}
	if e.outbox != nil {
		f := &outbox.Flusher{S: e.outbox, P: FlushTarget(e.primary), Log: e.log, Lease: e.cfg.Lease, SendTimeout: 2 * e.cfg.CallTimeout, StopGrace: e.cfg.StopGrace, Adopt: e.resolveLeft}
		wg.Add(2)
		go func() { defer wg.Done(); f.Run(flushCtx) }()
		e.theirsFirst = make(chan struct{})                    // before any tool call is read
		go func() { defer wg.Done(); e.watchUnapplied(ctx) }() // localdelete.go
	}
	wg.Add(1)
	go func() { defer wg.Done(); e.retryStayed(ctx) }() // replicate.go
	e.connectEarly(ctx, wg)
}

// openState opens what the edge keeps on this device: its state
// directory, the replication policy, the tool cache, the outbox (with the
// writes a killed edge left at the local palace resolved, and the ops an
// earlier run held released by the policy) and the device's last grants.
func (e *Edge) openState(ctx context.Context) {
	dir := e.cfg.StateDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.log.Error("cannot create the edge's state directory; replication is off", "dir", dir, "err", err)
	}
	e.pw = &policyWatch{dir: dir}
	_, polErr, _ := e.pw.current()
	if polErr != nil {
		// Replicating with an unknown policy could send a private wing to
		// the primary: writes are held until the file is fixed.
		e.log.Error("replication policy unreadable; writes are held in the outbox, unsent, until it parses", "err", polErr)
	}
	e.loadToolCache()
	ob, err := outbox.OpenOptions(filepath.Join(dir, outbox.FileName), outbox.Options{Device: e.cfg.OriginDevice, Label: e.cfg.OriginLabel, Primary: ladder.RedactURL(e.cfg.PrimaryURL), Token: e.cfg.Token, Log: e.log})
	if err != nil {
		e.obErr = err
		e.log.Error("outbox unavailable: local writes still succeed but are not replicated", "err", err)
	}
	e.outbox = ob
	if ob != nil {
		e.mismatch, _ = ob.Meta(ctx, metaEmbedderMismatch) // unreadable reads as none: the next disagreeing pair records it again
		e.resolveLeft(ctx)                                 // writes a killed edge left at the local palace, and ops held by an earlier run
	}
	e.loadDevice(ctx)
}

// connectEarly connects to the primary in the background to learn its
// tools; a failure only opens the breaker. The tool list waits for the
// primary's tools at most PrimaryToolsWait, and not at all once the
// primary is known down.
func (e *Edge) connectEarly(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(2)
	go func() {
		defer wg.Done()
		cctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
		defer cancel()
		_, err := e.primary.sessionFor(cctx)
		switch {
		case err == nil:
			e.resume() // the token accepted: writes an earlier run saw refused for it go now
		case ctx.Err() == nil:
			e.primary.fail(cctx, err) // opens the breaker, which reports it
			e.readyWhenChild(ctx)
		}
	}()
	go func() {
		defer wg.Done()
		t := time.NewTimer(e.cfg.PrimaryToolsWait)
		defer t.Stop()
		select {
		case <-t.C:
			e.readyWhenChild(ctx)
		case <-ctx.Done():
		}
	}()
}

// resume makes the queued writes that waited for the primary, or for it
// to accept the token, due now (the primary answered with the token).
func (e *Edge) resume() {
	if e.outbox == nil {
		return
	}
	if err := e.outbox.Resume(context.Background()); err != nil {
		e.log.Warn("queued writes wait out their backoff: the outbox could not be resumed", "err", err)
	}
	e.primaryAnswered()
}

// primaryAnswered has watchUnapplied read the held notes of dropped
// edits again: the primary answered.
func (e *Edge) primaryAnswered() {
	select {
	case e.primaryUp <- struct{}{}:
	default: // one is pending already
	}
}

// setAgent records the agent's session (only if none is known, unless replace).
func (e *Edge) setAgent(ss *mcp.ServerSession, replace bool) {
	e.mu.Lock()
	if replace || e.agent == nil {
		e.agent = ss
	}
	e.mu.Unlock()
}

func (e *Edge) agentSession() *mcp.ServerSession {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.agent
}

func (e *Edge) forwardLog(ctx context.Context, p *mcp.LoggingMessageParams) {
	if ss := e.agentSession(); ss != nil {
		ss.Log(ctx, p) // an agent gone: nothing to tell
	}
}

func (e *Edge) forwardProgress(ctx context.Context, p *mcp.ProgressNotificationParams) {
	if ss := e.agentSession(); ss != nil {
		ss.NotifyProgress(ctx, p) // an agent gone: nothing to tell
	}
}
