package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/redact"
	"github.com/joakimp/devbox-config/warmconn"
)

// ErrPrimaryDown is returned at once, without touching the network, while
// the circuit breaker is open.
var ErrPrimaryDown = errors.New("primary unreachable")

// Primary supervises the connection to the primary palace: one MCP session
// over Streamable HTTP (upstream's POST-only JSON server and compliant
// session-issuing servers alike), re-initialized single-flight when a
// session expires, every call bounded by a timeout, and a circuit breaker
// that answers at once while the primary is down and probes /healthz to
// close again.
type Primary struct {
	endpoint string
	token    func() string
	o        PrimaryOptions // its waits made explicit (NewPrimary)
	log      *slog.Logger
	httpc    *http.Client
	warm     *warmconn.Transport // nil if the endpoint is not http(s)
	client   *mcp.Client
	ledger   atomic.Int32               // 0 unknown, 1 a gateway's op-id ledger answers, 2 none
	device   atomic.Pointer[advertised] // what the gateway last said of this device (nil: none said)
	heard    atomic.Int64               // when an answer last carried it (unix ns; 0: never this run)
	deviceMu sync.Mutex                 // one device change kept and said at a time (sawDevice)

	mu         sync.Mutex
	session    *mcp.ClientSession
	connecting *flight // non-nil while a connect is in flight
	down       bool
	unauth     bool
	lastErr    error
	probing    bool
	asking     *deviceAsk   // RefreshDevice's ask out, nil when none
	lastStatus atomic.Int32 // last HTTP status seen
	// failedWhy is what the last answer's body said of a server error
	// (a gateway's "upstream unreachable"), nil after any other answer:
	// the SDK keeps only the status's name.
	// A call keeps its own (withWhySlot): a concurrent answer neither
	// clears nor replaces it.
	failedWhy atomic.Pointer[answerWhy]
	next      atomic.Uint64 // ids of the calls sent as plain POSTs

	// ctx ends at Close; wg holds every goroutine the Primary starts
	// (prober, tool listing, closing a dropped session, telling the
	// primary of a call given up), and Close waits for them.
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	isClosed bool
}

// PrimaryOptions tune a Primary.
type PrimaryOptions struct {
	Timeout time.Duration // each call's bound (default 10 s)
	// AskTimeout bounds how long RefreshDevice's caller waits for the
	// gateway's answer (default DefaultGrantAsk); the ask itself has
	// Timeout.
	AskTimeout time.Duration
	// Probe is the first wait before probing a primary that went down;
	// the waits double (jittered) up to ProbeMax. Defaults: 250 ms, 30 s.
	Probe, ProbeMax time.Duration
	OnUp            func()                  // called when the breaker closes
	OnTools         func(tools []*mcp.Tool) // the primary's tool list after each connect
	Version         string                  // the edge's, reported to the primary
	// OnLedger is told, on the first answer and on every change, whether
	// the primary advertises an op-id ledger (a devbox-config gateway).
	OnLedger func(advertised bool)
	// OnDevice is told the Devbox-Config-Device header's value each time
	// it changes (the first one heard included), once it reads, before
	// Device says it; one call at a time.
	OnDevice func(header string)
	// Quiet: the caller reports the primary's failures itself (join's
	// report), so its going down or refusing the token is not logged; an
	// edge serving an agent logs both.
	Quiet bool
	// maxAnswer bounds one answer read (0: maxPrimaryAnswer); tests set
	// smaller.
	maxAnswer int
}

// NewPrimary prepares a supervisor for endpoint. token is called for every
// request, so a rotated MEMPALACE_REMOTE_TOKEN is picked up.
func NewPrimary(endpoint string, token func() string, log *slog.Logger, o PrimaryOptions) *Primary {
	if o.Timeout <= 0 {
		o.Timeout = DefaultPrimaryTimeout
	}
	if o.AskTimeout <= 0 {
		o.AskTimeout = DefaultGrantAsk
	}
	if o.Probe <= 0 {
		o.Probe = 250 * time.Millisecond
	}
	if o.ProbeMax <= 0 {
		o.ProbeMax = 30 * time.Second
	}
	if o.maxAnswer <= 0 {
		o.maxAnswer = maxPrimaryAnswer
	}
	p := &Primary{endpoint: endpoint, token: token, o: o, log: log}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	var next http.RoundTripper = http.DefaultTransport
	if w, err := warmconn.New(endpoint, http.DefaultTransport); err == nil {
		w.DialTimeout = o.Timeout // a connect that hangs is an outage, however long the call's own bound
		p.warm, next = w, w
	}
	p.httpc = &http.Client{Transport: &bearer{p: p, next: next}}
	p.client = mcp.NewClient(&mcp.Implementation{Name: "devbox-config-edge", Version: o.Version}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	return p
}

// bearer adds the token to every request (POST, GET and DELETE alike) and
// remembers the status, so 401/403 can be told from an outage. Every
// request but a session's DELETE also ends when the Primary is closed:
// the SDK sends its notifications/cancelled for a call given up on a
// context detached from the call's, for up to 5 s, and a session's close
// waits for it, so a primary that hung held Close (the edge's stop) 5 s.
// The DELETE is what Close itself sends, after the rest ended: a
// courtesy (the primary expires a session left open), it has closeBye,
// not the SDK's 5 s, so a session-issuing primary that hung does not hold
// the stop either.
type bearer struct {
	p    *Primary
	next http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	var ctx context.Context
	var cancel context.CancelFunc
	if r.Method == http.MethodDelete {
		ctx, cancel = context.WithTimeout(r.Context(), closeBye)
	} else {
		ctx, cancel = context.WithCancel(r.Context())
		stop := context.AfterFunc(b.p.ctx, cancel)
		context.AfterFunc(ctx, func() { stop() }) // forgotten when the request ends
	}
	if givenUp, ok := ctx.Value(givenUpKey{}).(context.Context); ok {
		stop := context.AfterFunc(givenUp, cancel) // a request of a connect ends when it is given up
		context.AfterFunc(ctx, func() { stop() })
	}
	r = r.Clone(ctx)
	if tok := b.p.token(); tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := b.next.RoundTrip(r)
	// The prober's /healthz asks for no token, so what it answers says
	// nothing of the token: stored, its 200 between two 401s made a failed
	// call read as "unreachable" where the token was refused.
	_, health := ctx.Value(healthKey{}).(bool)
	if err != nil {
		if !health {
			b.p.lastStatus.Store(0) // no answer: no status (a 401 before it says nothing of this)
		}
		cancel()
		return nil, ladder.Unreadable(err)
	}
	if !health {
		b.p.lastStatus.Store(int32(resp.StatusCode))
	}
	why := b.p.whySlot(ctx)
	why.Store(nil)
	if resp.StatusCode >= 500 {
		if text := peekWhy(resp, b.p.token()); text != nil {
			why.Store(&answerWhy{text: *text, gateway: ledger.Advertised(resp.Header)})
		}
	}
	b.p.sawDevice(resp.Header)
	if err := ladder.Redirected(r, resp); err != nil {
		resp.Body.Close() // nothing of it is read
		cancel()
		return nil, err
	}
	resp.Body = endBody{resp.Body, cancel}
	return resp, nil
}

// healthKey marks the prober's /healthz request, whose status is not
// the token's answer.
type healthKey struct{}

// whyKey carries a call's own failedWhy slot in its context.
type whyKey struct{}

// answerWhy is what a server error's body said, and whether a
// devbox-config gateway answered it (its 5xx is about the primary behind
// it: the gateway itself was reached).
type answerWhy struct {
	text    string
	gateway bool
}

// behindGateway is ErrPrimaryDown for a call a gateway answered with a
// server error: the gateway was reached, the primary behind it failed.
type behindGateway struct {
	err error  // the call's own error (outbox.ErrNotSent when it never left)
	why string // the gateway's words
}

func (e behindGateway) Error() string {
	return "the gateway answered, but the primary behind it failed: " + e.why
}
func (e behindGateway) Unwrap() []error { return []error{ErrPrimaryDown, e.err} }

// withWhySlot is ctx with a failedWhy slot of its own, for every request
// made under it.
func withWhySlot(ctx context.Context) context.Context {
	return context.WithValue(ctx, whyKey{}, new(atomic.Pointer[answerWhy]))
}

// whySlot is ctx's failedWhy slot, or the primary's shared one.
func (p *Primary) whySlot(ctx context.Context) *atomic.Pointer[answerWhy] {
	if s, ok := ctx.Value(whyKey{}).(*atomic.Pointer[answerWhy]); ok {
		return s
	}
	return &p.failedWhy
}

// peekWhy reads what a server error's body says (a JSON-RPC error's
// message, or its first line of text; nil: nothing), leaving the body to
// be read whole. A proxy or a debug page may repeat the request's
// Authorization header: token is taken out here (redact.Secret), before
// the text goes anywhere (a tool answer, the log, the outbox).
func peekWhy(resp *http.Response, token string) *string {
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	var rpc struct {
		Error struct{ Message string }
	}
	why := ""
	if json.Unmarshal(head, &rpc) == nil {
		why = rpc.Error.Message
	} else {
		why, _, _ = strings.Cut(string(head), "\n")
	}
	if why = strings.TrimSpace(why); why == "" || !utf8.ValidString(why) {
		return nil
	}
	why = redact.Secret(why, token)
	if r := []rune(why); len(r) > 200 {
		why = string(r[:200]) + "…"
	}
	return &why
}

// unechoedResult is res with the token taken out of its text if it is an
// error (isError; redact.Secret): a primary, or a proxy in front of it,
// may repeat the request's Authorization header, and the text goes into
// tool answers, the log and the outbox. A result that is not an error is
// returned as it came: a drawer may hold any text.
func (p *Primary) unechoedResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || !res.IsError {
		return res
	}
	tok := p.token()
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			t.Text = redact.Secret(t.Text, tok)
		}
	}
	if b, err := json.Marshal(res.StructuredContent); err == nil && res.StructuredContent != nil {
		if r := redact.JSON(b, tok); !bytes.Equal(r, b) {
			res.StructuredContent = json.RawMessage(r)
		}
	}
	return res
}

// unechoedErr is a failure whose text repeated the token, with its text
// redacted (see unechoedResult); errors.Is still finds what it wraps.
type unechoedErr struct {
	err  error
	text string
}

func (e unechoedErr) Error() string { return e.text }
func (e unechoedErr) Unwrap() error { return e.err }

// unechoedError is the primary's JSON-RPC error with the token taken out
// of its message and data (see unechoedResult).
func (p *Primary) unechoedError(e *jsonrpc.Error) *jsonrpc.Error {
	tok := p.token()
	return &jsonrpc.Error{Code: e.Code, Message: redact.Secret(e.Message, tok), Data: redact.JSON(e.Data, tok)}
}

// closeBye bounds a session's DELETE (see bearer).
const closeBye = time.Second

// endBody ends its request's context when it is closed.
type endBody struct {
	io.ReadCloser
	end context.CancelFunc
}

func (b endBody) Close() error {
	defer b.end()
	return b.ReadCloser.Close()
}

// advertised is a Devbox-Config-Device header as it came and as it reads.
type advertised struct {
	header string
	info   deviceinfo.Info
}

// sawDevice keeps the device an answer's header advertises. The gateway
// sends the same header on every answer: it is decoded only when it
// changes, not on every call. A change is told to OnDevice (kept) before
// Device says it, one change at a time: what the edge acts on (a trust
// revocation told to a session) is what a next run finds kept, even if
// this one is stopped right after.
func (p *Primary) sawDevice(h http.Header) {
	v := h.Get(deviceinfo.Header)
	if v != "" {
		p.heard.Store(time.Now().UnixNano())
	}
	if v == "" || p.sameDevice(v) {
		return
	}
	p.deviceMu.Lock()
	defer p.deviceMu.Unlock()
	if p.sameDevice(v) {
		return // another answer told it meanwhile
	}
	if in, ok := deviceinfo.FromHeader(h); ok {
		if p.o.OnDevice != nil {
			p.o.OnDevice(v)
		}
		p.device.Store(&advertised{header: v, info: in})
	}
}

// sameDevice reports whether v is the header Device says.
func (p *Primary) sameDevice(v string) bool {
	last := p.device.Load()
	return last != nil && last.header == v
}

// Device is what a devbox-config gateway last said of this device
// (its Devbox-Config-Device header); false before one did.
func (p *Primary) Device() (deviceinfo.Info, bool) {
	if a := p.device.Load(); a != nil {
		return a.info, true
	}
	return deviceinfo.Info{}, false
}

// RefreshDevice asks the gateway again what it says of this device,
// unless the breaker is open: one ping, the cheapest authenticated
// request (every authenticated answer carries the header). It reports
// whether an answer came within AskTimeout, so Device is what the gateway
// says now. The ask itself goes on, within the call timeout, after its
// caller stopped waiting: a slow primary's late answer still brings the
// grants for the next write and is not taken for an outage; a hung
// primary's ask fails like any call and opens the breaker. One ask at a
// time: a caller while one is out waits for it until its AskTimeout, no
// longer (with the primary hung, the refusals after the first answer at
// once).
func (p *Primary) RefreshDevice(ctx context.Context) bool {
	a := p.askDevice()
	if a == nil {
		return false
	}
	t := time.NewTimer(time.Until(a.by))
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
	case <-ctx.Done():
	}
	return p.heard.Load() >= a.asked
}

// deviceAsk is RefreshDevice's ping, sent at asked (unix ns), waited for
// until by; done is closed when it ended.
type deviceAsk struct {
	done  chan struct{}
	by    time.Time
	asked int64
}

// askDevice is the ask out, or a new one sent; nil while the breaker is
// open or after Close.
func (p *Primary) askDevice() *deviceAsk {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || p.isClosed {
		return nil
	}
	if p.asking != nil {
		return p.asking
	}
	now := time.Now()
	a := &deviceAsk{done: make(chan struct{}), by: now.Add(p.o.AskTimeout), asked: now.UnixNano()}
	p.asking = a
	p.goLocked(func() {
		ctx, cancel := context.WithTimeout(p.ctx, p.o.Timeout)
		defer cancel()
		if err := p.handshake(ctx); err != nil && p.ctx.Err() == nil {
			p.fail(ctx, err)
		}
		p.mu.Lock()
		p.asking = nil
		p.mu.Unlock()
		close(a.done)
	})
	return a
}

// Up reports whether calls are attempted (the breaker is closed).
func (p *Primary) Up() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.down
}

// Connected reports a session open with the primary: its connect was
// answered, and no failure dropped it since.
func (p *Primary) Connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.session != nil
}

// State describes the breaker for status output: "up", "down: …" or
// "unauthorized".
func (p *Primary) State() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.unauth:
		return "unauthorized"
	case p.down:
		return fmt.Sprintf("down: %v", p.lastErr)
	}
	return "up"
}

// DefaultPrimaryTimeout bounds a call to the primary when
// PrimaryOptions.Timeout is 0.
const DefaultPrimaryTimeout = 10 * time.Second

// DefaultGrantAsk bounds how long a write the grants last heard refuse
// waits for the gateway's fresh answer (PrimaryOptions.AskTimeout 0).
const DefaultGrantAsk = time.Second

// Close ends the session, a connect in progress and the prober, and
// returns once every goroutine the Primary started (and that connect) has
// ended.
func (p *Primary) Close() {
	p.mu.Lock()
	s, connecting := p.session, p.connecting
	p.session, p.isClosed = nil, true
	p.mu.Unlock()
	p.cancel()
	if connecting != nil {
		<-connecting.done // a caller's connect, ended by the cancel: its session, if any, is closed
	}
	if s != nil {
		s.Close() // ending: the session is gone either way
	}
	if p.warm != nil {
		p.warm.Close()
	}
	p.wg.Wait()
}

// goLocked runs fn on a goroutine Close waits for (p.mu held); after Close
// it starts nothing.
func (p *Primary) goLocked(fn func()) {
	if p.isClosed {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		fn()
	}()
}

// goOwned is goLocked for a caller without p.mu.
func (p *Primary) goOwned(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.goLocked(fn)
}

// Call runs a tool on the primary. While the breaker is open it fails at
// once with ErrPrimaryDown (outbox.ErrUnauthorized when the primary
// refused the token: a configuration problem, not an outage). A JSON-RPC error from the primary is returned
// as it is (the primary is up); a transport failure opens the breaker. An
// expired session is re-initialized and, if retry, the call is sent once
// more (reads; writes go through the outbox, which knows what is safe). A
// read whose ctx is marked warmconn.WithReplayable may also be resent by the warm
// transport when its connection fails before the answer began.
func (p *Primary) Call(ctx context.Context, params *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	return p.CallLong(ctx, params, retry)
}

// CallLong is Call bounded by ctx's own deadline instead of the call
// timeout (event_wait long-polls for up to five minutes); a connect it
// needs first has the call timeout.
func (p *Primary) CallLong(ctx context.Context, params *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	return p.callBounded(ctx, params, retry, false)
}

// Send is CallLong for an outbox op's own write, bounded by its send
// bound. Running out of it on a live connection (the request left, or
// was still being written: a checkpoint over a slow uplink) says the
// write is slower than its bound, not that the primary is down, as long
// as the primary still answers a ping within the call timeout (stillUp):
// then the breaker stays closed and nothing logs the primary unreachable
// (attack91 F4). A primary that does not answer it (hung after taking
// the connection) opens the breaker, as any call that times out does
// (review28b F1).
func (p *Primary) Send(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return p.callBounded(ctx, params, false, true)
}

// callBounded is CallLong; own: ctx's deadline is an outbox send's bound
// (Send).
func (p *Primary) callBounded(ctx context.Context, params *mcp.CallToolParams, retry, own bool) (*mcp.CallToolResult, error) {
	if !p.Up() {
		return nil, p.downErr()
	}
	ctx = withWhySlot(ctx)
	for attempt := 0; ; attempt++ {
		s, err := p.connected(ctx)
		if err != nil {
			return nil, p.fail(ctx, fmt.Errorf("%w: %w", outbox.ErrNotSent, err)) // no session: the call never left
		}
		res, err := p.callOn(ctx, s, params)
		if err == nil {
			return p.unechoedResult(res), nil
		}
		if e := peerError(err); e != nil {
			return nil, p.unechoedError(e)
		}
		if errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, mcp.ErrConnectionClosed) {
			p.drop(s)
			if retry && attempt == 0 {
				continue
			}
		}
		if tooLarge := answerOverCap(err, p.whySlot(ctx).Load()); tooLarge != nil && !own {
			return nil, tooLarge // the primary answered: too much, not an outage (attack102 F5)
		}
		if !own && errors.Is(err, errAnswerArriving) {
			p.slowAnswer(params.Name)
			return nil, err // the primary answered: a slow link, not an outage (attack97 F8)
		}
		if own && timedOut(err) && (!errors.Is(err, outbox.ErrNotSent) || errors.Is(err, errCutWriting)) && p.stillUp(ctx, params.Name) {
			if errors.Is(err, outbox.ErrNotSent) {
				return nil, err // cut while still being written: not sent
			}
			return nil, noAnswerError{err} // it left: it may have landed
		}
		return nil, p.fail(ctx, err)
	}
}

// connected is the live session, connecting within the call timeout: a
// connect that hangs is an outage, whatever ctx's own deadline. Without
// one, ctx's trace is told at once that the call's request is not
// written (errConnectFirst): a merged read asks the local palace
// meanwhile, not once a connect that hangs has failed (its time came on
// top of the call timeout: attack97 F2).
func (p *Primary) connected(ctx context.Context) (*mcp.ClientSession, error) {
	if tr := httptrace.ContextClientTrace(ctx); tr != nil && tr.WroteRequest != nil && !p.Connected() {
		tr.WroteRequest(httptrace.WroteRequestInfo{Err: errConnectFirst})
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	return p.sessionFor(ctx)
}

// errConnectFirst: a call's request waits for a connect (connected).
var errConnectFirst = errors.New("not written: the primary is connected to first")

// stillUp reports whether the primary answers a ping within the call
// timeout after a write (tool) ran out of its own bound on a live
// connection; it logs the slow write if so.
func (p *Primary) stillUp(ctx context.Context, tool string) bool {
	pctx, cancel := context.WithTimeout(p.ctx, p.o.Timeout)
	defer cancel()
	if p.handshake(withWhySlot(pctx)) != nil {
		return false
	}
	if !p.o.Quiet {
		p.log.Info("a write ran past its send bound while the primary still answers: a slow link or primary, not an outage; the next send has twice the time",
			"tool", tool, "op", outbox.OpIDFrom(ctx))
	}
	return true
}

// slowAnswer logs a call (tool) whose answer was still arriving at its
// bound: the breaker stays closed.
func (p *Primary) slowAnswer(tool string) {
	if !p.o.Quiet {
		p.log.Info("an answer of the primary was still arriving when its call ran out of time: a large answer or a slow link, not an outage", "tool", tool)
	}
}

// callOn runs one call on session s: as a plain POST where the session
// allows it (see post), else through the SDK.
func (p *Primary) callOn(ctx context.Context, s *mcp.ClientSession, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if !postable(s) {
		return s.CallTool(ctx, params)
	}
	body, err := wire.EncodeCallParams(params)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", params.Name, err)
	}
	raw, err := p.post(ctx, s, body)
	if err != nil {
		return nil, err
	}
	return wire.DecodeResult(raw)
}

// flight is a connect in flight: done is closed when it ended; err is
// its failure, unless its caller gave it up (context.Canceled), and why
// what the failing answer's body said (failedWhy).
type flight struct {
	done chan struct{}
	err  error
	why  *answerWhy
}

// sessionFor returns the live session, connecting single-flight if needed.
// A caller that waited for a connect that failed takes its failure rather
// than connecting again: the primary has just not answered (within the
// call timeout, for a connect that hangs), and a second connect made a
// call wait for two (attack97 F2: the timeout and 2 s more, for a read
// sent while the edge's first connect was out).
func (p *Primary) sessionFor(ctx context.Context) (*mcp.ClientSession, error) {
	for {
		p.mu.Lock()
		if p.session != nil {
			s := p.session
			p.mu.Unlock()
			return s, nil
		}
		if f := p.connecting; f != nil {
			p.mu.Unlock()
			select {
			case <-f.done:
				if f.err != nil {
					p.whySlot(ctx).Store(f.why)
					return nil, f.err
				}
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if p.isClosed {
			p.mu.Unlock()
			return nil, fmt.Errorf("connect: %w", context.Canceled)
		}
		f := &flight{done: make(chan struct{})}
		p.connecting = f
		p.mu.Unlock()

		s, err := p.connect(ctx)
		p.mu.Lock()
		p.connecting = nil
		if err == nil && p.isClosed {
			s.Close() // Close ran meanwhile: it waits for this, not for a session it never saw
			err = fmt.Errorf("connect: %w", context.Canceled)
		} else if err == nil {
			p.session = s
		}
		if !errors.Is(err, context.Canceled) {
			f.err, f.why = err, p.whySlot(ctx).Load()
		}
		close(f.done)
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		p.initLedger(s)
		p.goOwned(func() { p.listTools(s) })
		return s, nil
	}
}

// givenUpKey carries in a connect's context one that ends when the
// connect is given up: bearer ends the connect's requests with it, the
// SDK's notifications/cancelled for the initialize given up too. The SDK
// sends that notice on a context detached from the connect's (its values
// kept) for up to 5 s, and the session's Close inside Connect waits for
// it: a primary that accepts and never answers held the edge's stop 5 s.
type givenUpKey struct{}

// connect opens a session, ended early by Close as well as by ctx.
func (p *Primary) connect(ctx context.Context) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	givenUp, giveUp := context.WithCancel(context.Background())
	keep := context.AfterFunc(ctx, giveUp)
	s, err := p.client.Connect(context.WithValue(ctx, givenUpKey{}, givenUp), &mcp.StreamableClientTransport{
		Endpoint: p.endpoint, HTTPClient: p.httpc, MaxRetries: -1,
		// MemPalace sends nothing unprompted; upstream answers GET /mcp
		// with 404. Not opening the stream avoids both.
		DisableStandaloneSSE: true,
	}, nil)
	if err == nil {
		keep() // the session's own requests (its close's DELETE) outlive the connect
	}
	return s, err
}

func (p *Primary) listTools(s *mcp.ClientSession) {
	if p.o.OnTools == nil {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.o.Timeout)
	defer cancel()
	if tools, err := toolsOn(ctx, s); err == nil { // none: the next connect lists them, or ListTools
		p.o.OnTools(tools)
	}
}

// LastStatus is the HTTP status of the primary's last answer (0 before
// any, or when the last request got none).
func (p *Primary) LastStatus() int { return int(p.lastStatus.Load()) }

// ListTools lists the primary's tools now, within the call timeout, on
// the live session (connected if need be), and hands them to OnTools as
// a connect's list does: for a caller that must know a schema before it
// calls (the mailbox's event_list), which the list made in the
// background at connect may not have brought in yet.
func (p *Primary) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	if !p.Up() {
		return nil, p.downErr()
	}
	ctx, cancel := context.WithTimeout(withWhySlot(ctx), p.o.Timeout)
	defer cancel()
	s, err := p.sessionFor(ctx)
	if err != nil {
		return nil, p.fail(ctx, err) // as a call's: no session, the primary is down (and the token redacted)
	}
	tools, err := toolsOn(ctx, s)
	if err != nil {
		return nil, unechoedErr{err, redact.Secret(err.Error(), p.token())}
	}
	if p.o.OnTools != nil {
		p.o.OnTools(tools)
	}
	return tools, nil
}

// toolsOn is session s's tool list, every page of it.
func toolsOn(ctx context.Context, s *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list the primary's tools: %w", err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// drop forgets a session that failed (only if it is still the current one).
func (p *Primary) drop(s *mcp.ClientSession) {
	p.mu.Lock()
	if p.session == s {
		p.session = nil
	}
	p.goLocked(func() { s.Close() }) // a failed session: closing it is courtesy
	p.mu.Unlock()
}

// fail opens the breaker for a transport failure and starts the prober.
func (p *Primary) fail(ctx context.Context, err error) error {
	unauth := p.refused() != 0
	if errors.Is(err, context.Canceled) {
		return err
	}
	why := p.whySlot(ctx).Swap(nil)
	if why != nil && why.gateway {
		err = behindGateway{err, why.text}
	} else if why != nil && !strings.Contains(err.Error(), why.text) {
		err = fmt.Errorf("%w (the primary's answer said: %s)", err, why.text)
	}
	if text := redact.Secret(err.Error(), p.token()); text != err.Error() {
		err = unechoedErr{err, text} // a connect's JSON-RPC error (initialize's) that repeats the token
	}
	p.mu.Lock()
	wasDown := p.down
	p.down, p.unauth, p.lastErr = true, unauth, err
	if s := p.session; s != nil {
		p.goLocked(func() { s.Close() }) // a failed session: closing it is courtesy
		p.session = nil
	}
	if !p.probing {
		p.probing = true
		p.goLocked(p.probe)
	}
	p.mu.Unlock()
	var down error = fmt.Errorf("%w: %w", ErrPrimaryDown, err)
	var gw behindGateway
	switch {
	case errors.As(err, &gw):
		down = err // the gateway answered: "primary unreachable" would send the user to it
	case timedOut(err) && !errors.Is(err, outbox.ErrNotSent):
		down = noAnswerError{err} // it was reached: "unreachable" would send the user to the network
	}
	if !wasDown && !p.o.Quiet {
		if unauth {
			p.log.Error("the primary refused the token; nothing is sent to it until MEMPALACE_REMOTE_TOKEN is fixed (devbox-config doctor names the fix)", "url", logURL(p.endpoint))
		} else {
			p.log.Warn("primary unreachable; answering from the local palace", "url", logURL(p.endpoint), "err", down)
		}
	}
	if unauth {
		return outbox.ErrUnauthorized
	}
	return down
}

// timedOut reports a call given up for its deadline: the call's context's,
// or the connection's read deadline (warmconn's).
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// noAnswerError is ErrPrimaryDown for a call that left and was not
// answered in time: the primary may have applied it (outbox.Lost).
type noAnswerError struct{ err error }

func (e noAnswerError) Error() string   { return "the primary did not answer in time: " + e.err.Error() }
func (e noAnswerError) Unwrap() []error { return []error{ErrPrimaryDown, e.err} }

func (p *Primary) downErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.unauth:
		return outbox.ErrUnauthorized
	case p.lastErr == nil: // closed again meanwhile
		return fmt.Errorf("%w: %w", ErrPrimaryDown, outbox.ErrNotSent)
	}
	// This call never left: the breaker answered it. The last failure's
	// words are said once, as they were for the call that met it.
	var gw behindGateway
	switch {
	case errors.As(p.lastErr, &gw):
		return behindGateway{fmt.Errorf("%w: %w", outbox.ErrNotSent, gw.err), gw.why}
	case errors.Is(p.lastErr, outbox.ErrNotSent):
		return fmt.Errorf("%w: %w", ErrPrimaryDown, p.lastErr)
	}
	return fmt.Errorf("%w (%w): %v", ErrPrimaryDown, outbox.ErrNotSent, p.lastErr)
}

// logURL is a URL without its credentials and query, for logs.
func logURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable url)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// sdkSentinels are the messages of go-sdk's own transport errors, which it
// reports as JSON-RPC errors with codes -32001…-32005, the same codes
// MemPalace's gates use. A peer's real answer never has these messages.
var sdkSentinels = map[string]bool{"rejected by transport": true, "server is closing": true, "client is closing": true, "unknown error": true, "internal error": true}

// peerError returns the JSON-RPC error a peer actually answered, or nil for
// a transport failure (however the SDK dressed it) and for a palace that
// is down (whatever its cause: a failed handshake's error is not an
// answer to this call).
func peerError(err error) *jsonrpc.Error {
	var e *jsonrpc.Error
	if err == nil || !errors.As(err, &e) || sdkSentinels[e.Message] || errors.Is(err, mcp.ErrSessionMissing) ||
		errors.Is(err, ErrLocalDown) || errors.Is(err, ErrPrimaryDown) {
		return nil
	}
	return e
}
