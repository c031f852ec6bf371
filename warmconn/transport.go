package warmconn

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Transport is the HTTP/1.1 transport of the edge's traffic to its
// primary. Upstream `mempalace serve` closes the connection after every
// answer (Connection: close), so with net/http every tool call would
// first pay a TCP connect (and a TLS handshake for https) and three
// goroutine hand-offs. Here a call is written and read on the calling
// goroutine, over a connection dialled in advance: after a response that
// closes its connection, one spare is dialled in the background for the
// next call. A server that keeps connections alive gets them reused.
// While the agent is at work (a call in the last warmFor), an idle
// connection about to age out (maxAge, inside upstream's 10 s socket
// timeout) is replaced by a fresh one, so calls seconds apart find one
// ready too; after that the pool lets its connections lapse.
//
// A connection taken from the pool is checked first (a peek: has the
// server closed it?). If it fails anyway before a byte of the answer is
// read, the server most likely closed it as the request went out; a
// request safe to send twice (GET, HEAD, or a read marked by
// WithReplayable) is sent once more on a fresh connection, and a write
// fails as it would have (the outbox sends it again later). Requests
// through a proxy (HTTP_PROXY and friends) or to another origin go to the
// fallback (net/http).
type Transport struct {
	// DialTimeout bounds each connect, its TLS handshake included
	// (default 10 s); set it before the first request.
	DialTimeout time.Duration

	origin   string // scheme://host:port this transport serves
	addr     string
	tls      *tls.Config // nil for http
	dialer   net.Dialer
	fallback http.RoundTripper
	proxy    func(*http.Request) (*url.URL, error)
	maxAge   time.Duration // an idle connection older than this is not used
	warmFor  time.Duration // how long after a call one is kept ready

	mu      sync.Mutex
	idle    []*warmConn // newest last
	dialing bool        // a spare is being dialled
	closed  bool
	lastUse time.Time

	// ctx ends at Close; wg holds the background dials, which Close waits
	// for.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// maxIdle bounds the pool (the agent rarely has more calls in flight).
const maxIdle = 4

// spareMaxAge keeps a pooled connection well inside upstream's 10 s socket
// timeout, after which it closes a connection that sent nothing (and
// Node's 5 s keep-alive timeout, roughly).
const spareMaxAge = 4 * time.Second

// warmAfterUse is how long after the agent's last call to the primary a
// connection is kept ready: an agent's turn, not the hours between them.
const warmAfterUse = 2 * time.Minute

func New(endpoint string, fallback http.RoundTripper) (*Transport, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	t := &Transport{fallback: fallback, proxy: http.ProxyFromEnvironment, maxAge: spareMaxAge, warmFor: warmAfterUse,
		dialer: net.Dialer{KeepAlive: 30 * time.Second}}
	switch u.Scheme {
	case "http":
	case "https":
		t.tls = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	default:
		return nil, fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	t.addr, t.origin = hostPort(u), originOf(u)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// dialLocked dials a connection in the background (t.mu held), on a
// goroutine Close waits for; then done gets it (nil if the dial failed).
// After Close it dials nothing and reports false.
func (t *Transport) dialLocked(done func(*warmConn)) bool {
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		c, _ := t.dial(t.ctx) // nil when the dial failed: done is told so
		done(c)
	}()
	return true
}

// originOf is scheme://host:port, the port made explicit.
func originOf(u *url.URL) string { return u.Scheme + "://" + hostPort(u) }

// hostPort is the address to dial for u (80 or 443 if it names no port).
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

type warmConn struct {
	net.Conn
	raw   net.Conn // under TLS, for the peek
	age   *time.Timer
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time
	read  int64 // bytes read in the current exchange
}

// cut reports whether ctx's request was cut by its caller: ctx ended, or
// its deadline (the connection's too) has passed.
func cut(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(dl)
}

// abort closes a connection whose request its caller cut (its context's
// deadline or cancel) with a reset (SO_LINGER 0): the kernel discards the
// bytes of the request not yet transmitted instead of sending them after
// the cut, so the server gets a truncated request, which it does not
// apply, rather than the whole of it seconds later, after the caller's
// look-up found nothing and it sent the request again (a diary entry
// filed twice over a slow link: attack91 F1). Bytes a buffering proxy
// took already still reach the server whole (docs/replication.md).
func (c *warmConn) abort() {
	if tc, ok := c.raw.(*net.TCPConn); ok {
		tc.SetLinger(0) // a failure leaves an ordinary close, as before
	}
	c.raw.Close() // under TLS too: no close_notify behind the unsent bytes; the caller's error is the one to report
}

func (c *warmConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	return n, err
}

// earlyAnswerWait bounds the wait for an answer the server sent before it
// read the whole request, once writing the request failed: such an answer
// is sent before the server closes (which broke the write), so it is here
// already; a server that died sent none, and the read ends at once.
const earlyAnswerWait = 200 * time.Millisecond

// errNothingRead marks a failure before any byte of the answer arrived.
var errNothingRead = errors.New("the connection failed before the answer began")

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if originOf(req.URL) != t.origin {
		return t.fallback.RoundTrip(req)
	}
	if t.proxy != nil {
		if p, err := t.proxy(req); err != nil || p != nil {
			return t.fallback.RoundTrip(req)
		}
	}
	t.mu.Lock()
	t.lastUse = time.Now()
	t.mu.Unlock()
	for attempt := 0; ; attempt++ {
		var c *warmConn
		pooled := false
		if attempt == 0 {
			c, pooled = t.take()
		}
		if c == nil {
			var err error
			if c, err = t.dial(req.Context()); err != nil {
				if req.Body != nil {
					req.Body.Close() // a RoundTripper closes the body; the dial's error is reported
				}
				return nil, err
			}
		}
		if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: c.Conn, Reused: pooled})
		}
		resp, err := t.exchange(c, req)
		if err == nil {
			return resp, nil
		}
		if cut(req.Context()) {
			c.abort() // cut by its caller: what has not left must not arrive later
		} else {
			c.Close() // the exchange's error is the one to report
		}
		if pooled && attempt == 0 && errors.Is(err, errNothingRead) && replayable(req) && req.Context().Err() == nil {
			// Most likely the server closed the idle connection as the
			// request went out and never took it. Once more, on a fresh
			// connection, for a request that is safe to send twice.
			if req, err = rewind(req); err == nil {
				continue
			}
		}
		return nil, err
	}
}

// replayableKey marks a request's context: safe to send twice (a read).
type replayableKey struct{}

// WithReplayable marks ctx's requests as safe to send twice.
func WithReplayable(ctx context.Context) context.Context {
	return context.WithValue(ctx, replayableKey{}, true)
}

// replayable is net/http's rule (GET and HEAD) plus requests marked by
// WithReplayable: a tool call the edge may send again (a read).
func replayable(req *http.Request) bool {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return true
	}
	ok, _ := req.Context().Value(replayableKey{}).(bool)
	return ok
}

// rewind is req with its body from the start (a copy: a RoundTripper
// must not change the caller's request).
func rewind(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	if req.GetBody == nil {
		return nil, errors.New("the request body cannot be sent again")
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Body = body
	return r, nil
}

// take returns a pooled connection the server has not closed, newest first.
func (t *Transport) take() (*warmConn, bool) {
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			return nil, false
		}
		c := t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		c.age.Stop()
		if time.Since(c.since) < t.maxAge && alive(c.raw, c.raw != c.Conn) {
			return c, true
		}
		c.Close() // too old or closed by the server: discarded
	}
}

func (t *Transport) put(c *warmConn) {
	c.since = time.Now()
	t.mu.Lock()
	if t.closed || len(t.idle) >= maxIdle {
		t.mu.Unlock()
		c.Close() // the pool is full or closed: discarded
		return
	}
	t.idle = append(t.idle, c)
	c.age = time.AfterFunc(t.maxAge, func() { t.aged(c) })
	t.mu.Unlock()
}

// aged retires an idle connection at maxAge. While the agent is at work
// its replacement is dialled first and the old one retired after, so a
// call in between still finds a connection ready (maxAge is well inside
// upstream's socket timeout, so the old one lives the dial's few ms more).
func (t *Transport) aged(c *warmConn) {
	t.mu.Lock()
	idle := slices.Contains(t.idle, c)
	active := time.Since(t.lastUse) < t.warmFor
	replacing := idle && active && t.dialLocked(func(n *warmConn) {
		if n != nil {
			t.put(n)
		}
		t.retire(c)
	})
	t.mu.Unlock()
	if idle && !replacing {
		t.retire(c)
	}
}

// retire closes an idle connection unless a call took it meanwhile.
func (t *Transport) retire(c *warmConn) {
	t.mu.Lock()
	i := slices.Index(t.idle, c)
	if i < 0 {
		t.mu.Unlock()
		return
	}
	t.idle = slices.Delete(t.idle, i, i+1)
	t.mu.Unlock()
	c.Close() // an idle spare retired: nothing in flight
}

// spare dials one connection for the next call, unless one is idle or
// being dialled already.
func (t *Transport) spare() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dialing || len(t.idle) > 0 {
		return
	}
	t.dialing = t.dialLocked(func(c *warmConn) {
		t.mu.Lock()
		t.dialing = false
		t.mu.Unlock()
		if c != nil {
			t.put(c)
		}
	})
}

// dial connects (and shakes hands, for TLS) within DialTimeout (10 s
// when 0), whatever ctx's own deadline: a connect that hangs (a SYN
// blackholed) says the server is unreachable, where a long request's
// deadline is for the exchange.
func (t *Transport) dial(ctx context.Context) (*warmConn, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(t.DialTimeout, 10*time.Second))
	defer cancel()
	raw, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	conn := raw
	if t.tls != nil {
		tc := tls.Client(raw, t.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close() // the handshake's error is the one to report
			return nil, err
		}
		conn = tc
	}
	c := &warmConn{Conn: conn, raw: raw, since: time.Now()}
	c.br = bufio.NewReaderSize(c, 16<<10)
	c.bw = bufio.NewWriterSize(conn, 8<<10)
	return c, nil
}

// exchange writes req on c and reads the response head; the body is read
// by the caller, and c goes back to the pool (or is closed) when it ends.
func (t *Transport) exchange(c *warmConn, req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	dl, _ := ctx.Deadline()                                                   // zero: none
	c.SetDeadline(dl)                                                         // fails only on a closed connection, which the write then reports
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) }) // ends the exchange; on a closed connection nothing to end
	c.read = 0
	fail := func(err error) (*http.Response, error) {
		stop()
		if cut(ctx) {
			return nil, cmp.Or(ctx.Err(), context.DeadlineExceeded) // the connection's deadline, ctx's, may fire first
		}
		if c.read == 0 && c.br.Buffered() == 0 {
			return nil, fmt.Errorf("%w: %w", errNothingRead, err)
		}
		return nil, err
	}
	werr := send(c, req)
	broken := werr != nil
	if broken {
		if ctx.Err() != nil {
			return fail(werr)
		}
		// The server may have answered from the head alone and closed
		// without reading the body (serve refuses a bad token, or a body
		// over its limit, so): that answer is here already, and it is the
		// call's outcome, not the broken write. The deadline stays for its
		// body, which came with it.
		c.SetReadDeadline(time.Now().Add(earlyAnswerWait)) // fails only on a closed connection, which the read then reports
	}
	resp, err := http.ReadResponse(c.br, req)
	switch {
	case err != nil && broken:
		return fail(werr) // no answer: the write's error is the one to report
	case err != nil:
		return fail(err)
	}
	keep := !broken && !resp.Close && !req.Close
	done := func(eof bool) {
		stop()
		t.handBack(c, keep, eof)
	}
	if resp.Body == http.NoBody {
		done(true)
		return resp, nil
	}
	resp.Body = &warmBody{rc: resp.Body, done: done}
	return resp, nil
}

// send writes req on c without the caller's httptrace hooks (req.Write
// would call WroteRequest with the request still in c.bw), and calls
// WroteRequest once it is on the wire: a merged read starts its local
// half then.
func send(c *warmConn, req *http.Request) error {
	err := req.WithContext(context.Background()).Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	return err
}

// handBack ends an exchange on c: its connection goes back to the pool
// when the answer was read to its end (eof) and the connection may be
// kept; else it is closed, and after an answer that closes its
// connection a spare is dialled for the next call.
func (t *Transport) handBack(c *warmConn, keep, eof bool) {
	if eof && keep && c.br.Buffered() == 0 {
		t.put(c)
		return
	}
	c.Close() // not kept: the answer was read (or abandoned) already
	if !keep {
		t.spare()
	}
}

// warmBody hands its connection back at the end of the body (done(true))
// or closes it when the body is closed early (done(false)), whichever
// comes first (Close may come from another goroutine).
type warmBody struct {
	rc       io.ReadCloser
	done     func(eof bool)
	finished atomic.Bool
}

func (b *warmBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && b.finished.CompareAndSwap(false, true) {
		b.done(err == io.EOF)
	}
	return n, err
}

func (b *warmBody) Close() error {
	if b.finished.CompareAndSwap(false, true) {
		b.done(false)
	}
	return nil
}

// Close closes the idle connections and returns once the background
// dials have ended; no spare is dialled after it.
func (t *Transport) Close() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.closed = nil, true
	t.mu.Unlock()
	t.cancel()
	for _, c := range idle {
		c.age.Stop()
		c.Close() // idle: nothing in flight
	}
	t.wg.Wait()
}
