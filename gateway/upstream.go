package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/jsondepth"
	"github.com/joakimp/devbox-config/redact"
	"github.com/joakimp/devbox-config/warmconn"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// callTimeout bounds one upstream call (event_wait may hold five minutes).
const callTimeout = 5*time.Minute + 30*time.Second

// UpstreamRefused is the message of the 503 a device gets when the
// upstream refuses the gateway's own token: the device's token was fine.
const UpstreamRefused = "devbox-config gateway: the upstream refused the gateway's token: on the gateway's host, set MEMPALACE_UPSTREAM_TOKEN (or the config's upstream_token_file) to the primary's token and restart the gateway"

// ToolCall is one authorized tools/call on its way to the upstream.
type ToolCall struct {
	Device string
	Tool   string
	Reads  bool           // the catalogue's record: the call changes nothing
	Args   map[string]any // as authorized and stamped
	Body   []byte         // the message the upstream receives (re-encoded from the parse)
	// ArgsDigest is the digest of the arguments as the device sent them,
	// before the gateway narrowed or stamped them: what identifies one
	// write across its resends (the narrowing of a resend can differ: a
	// checkpoint item the first send filed is a duplicate the second time).
	ArgsDigest string
	// LegacyDigest is their unkeyed digest (legacyArgsDigest), what an
	// op-id ledger row written before args_digest was keyed holds.
	LegacyDigest string
}

// Send is the upstream call a Ledger wraps.
type Send func(ctx context.Context, body []byte) (status int, resp []byte)

// Ledger, when set on a Server, sits between the forward step and the
// upstream for every authorized tools/call: it may answer from its own
// record (a call it has already made once: replayed) or call next.
type Ledger interface {
	Forward(ctx context.Context, call ToolCall, next Send) Forwarded
}

// Forwarded is a Ledger's answer to a call.
type Forwarded struct {
	Status int    // HTTP
	Body   []byte // the JSON-RPC answer
	// Replayed: answered from the ledger's record (a call it has made once).
	Replayed bool
	// QueuedAs is the device the call said its op was queued as (an
	// edge's retry of an op held as another device's), "" for none;
	// RecordOf, on a replay of the record another device made of the same
	// write (that one, or one that said its op was queued as the caller),
	// that device. The audit line carries both.
	QueuedAs, RecordOf string
}

// forward is the forward step of a tools/call: the re-encoded message,
// through the ledger when there is one (replayed: it answered from its
// record).
func (s *Server) forward(ctx context.Context, d *Device, req *rpcRequest) (status int, body []byte, replayed bool, err error) {
	t, _ := catalogue.Lookup(req.Tool)
	call := ToolCall{Device: d.ID, Tool: req.Tool, Reads: t.Reads, Args: req.Args, Body: req.encode(), ArgsDigest: req.sentDigest, LegacyDigest: req.sentLegacy}
	if n := len(call.Body) - len(req.rawID()) + maxCallID; n > MaxBody {
		return 0, nil, false, &tooLarge{n}
	}
	send, full := s.upstreamCall, error(nil)
	if !t.Reads {
		// One write at a time to the single-writer primary: the slot is
		// taken here, after the ledger's claim (which answers an op in
		// flight or in doubt at once, holding nothing), unless the
		// handler holds it already (a delete, a rewrite: keep).
		send = func(ctx context.Context, body []byte) (int, []byte) {
			if !req.slotHeld {
				if full = s.writes.acquire(clientOf(ctx), d.ID); full != nil {
					return http.StatusTooManyRequests, rpcErrBytes(req.rawID(), CodeRateLimited, full.Error())
				}
				defer s.writes.release()
			}
			return s.sendWrite(ctx, d, t, req, body)
		}
	}
	if s.Ledger != nil {
		f := s.Ledger.Forward(ctx, call, send)
		status, body, replayed = f.Status, f.Body, f.Replayed
		req.queuedAs, req.recordOf = f.QueuedAs, f.RecordOf
	} else {
		status, body = send(ctx, call.Body)
	}
	if full != nil {
		return 0, nil, false, full
	}
	if req.unsent != nil {
		return http.StatusServiceUnavailable, nil, false, req.unsent // not sent: the trash drops what it kept
	}
	return status, body, replayed, nil
}

// maxCallID is the longest id the gateway gives a call (upstreamCall):
// a uint64's 20 digits.
const maxCallID = 20

// tooLarge is a call whose message to the upstream, as the gateway
// encodes it (its own id, stamps, JSON escapes: U+2028 becomes \u2028),
// is over mempalace serve's cap, though the device's body was within it
// (attack100 F5): not sent, where serve would answer 413 with no JSON-RPC.
type tooLarge struct{ n int }

func (e *tooLarge) Error() string {
	return fmt.Sprintf("Request too large: as the gateway sends it to the primary (its own id, its stamps, JSON escapes) it is up to %d bytes, over mempalace serve's %d MiB cap; nothing was sent: send it smaller", e.n, MaxBody>>20)
}

// upstreamCall POSTs one JSON-RPC message to the upstream's /mcp. The
// upstream never sees the id body carries (a device's, which a parser
// other than Go's may read otherwise: Python reads 1e400 as inf and
// answers Infinity, which is not JSON): it gets one of the gateway's own,
// and the answer goes back under body's id.
func (s *Server) upstreamCall(ctx context.Context, body []byte) (int, []byte) {
	id := gjson.GetBytes(body, "id")
	if id.Exists() { // a notification has none, and gets none
		body = setID(body, strconv.FormatUint(s.callIDs.Add(1), 10))
	}
	status, resp := postMCP(ctx, s.client, s.Upstream, s.UpstreamToken(), body)
	if id.Exists() && gjson.GetBytes(resp, "id").Exists() {
		resp = setID(resp, id.Raw)
	}
	switch {
	case status == http.StatusServiceUnavailable && gjson.GetBytes(resp, "error.message").String() == UpstreamRefused:
		s.upstreamRefuses(true)
	case status >= 200 && status <= 299:
		s.upstreamRefuses(false)
	}
	return status, resp
}

// setID is msg, a JSON-RPC message, with id (raw JSON) as its id; msg
// as it was if it is not a JSON object (not reached: the gateway encodes
// what it sends, and answerOf passes on only JSON it checked or its own).
func setID(msg []byte, id string) []byte {
	out, err := sjson.SetRawBytes(msg, "id", []byte(id))
	if err != nil {
		return msg
	}
	return out
}

// upstreamRefuses logs a change in whether the upstream refuses the
// gateway's token: once when it starts (every device call gets 503 until
// it is fixed), once when it ends; never per call, never the token.
func (s *Server) upstreamRefuses(now bool) {
	if s.refused.Swap(now) == now {
		return
	}
	if now {
		s.Log.Error("the upstream refused the gateway's token (HTTP 401): every device call gets 503 until it is fixed", "upstream", s.Upstream, "fix", "set MEMPALACE_UPSTREAM_TOKEN (or the config's upstream_token_file) to the primary's token, mempalace serve's MEMPALACE_MCP_HTTP_TOKEN, and restart the gateway")
		return
	}
	s.Log.Info("the upstream accepts the gateway's token", "upstream", s.Upstream)
}

// probeWait bounds the start-up probe of the upstream.
const probeWait = 10 * time.Second

// ProbeUpstream asks the upstream for its tools once, within probeWait,
// and logs what a device's call would meet: an upstream that answers
// (info), one not answering yet (a warning: normal while compose starts
// both; the gateway serves, and devices get 503 until it answers), one
// that refuses the gateway's token or is not MCP (an error naming the
// fix). It never stops the gateway.
func (s *Server) ProbeUpstream(ctx context.Context) {
	ctx, cancel := context.WithTimeout(warmconn.WithReplayable(ctx), probeWait)
	defer cancel()
	look := lookAtUpstream(ctx, s.client, s.Upstream, s.UpstreamToken())
	switch {
	case look.err != nil:
		s.Log.Warn("the upstream does not answer yet: devices get 503 until it does (normal while it starts beside the gateway)", "upstream", s.Upstream, "err", look.err, "fix", "if it lasts, start mempalace serve or correct --upstream")
		return
	case look.gateway:
		s.Log.Error("the upstream is a devbox-config gateway, not the primary: every device call fails (its /healthz said so; the upstream token was not sent)", "upstream", s.Upstream, "fix", "point --upstream at mempalace serve's /mcp (http://HOST:PORT/mcp), not at a gateway")
		return
	case look.status == http.StatusUnauthorized:
		s.upstreamRefuses(true)
		return
	case !look.mcp:
		s.Log.Error(fmt.Sprintf("the upstream answered HTTP %d to tools/list, not an MCP answer: every device call fails", look.status), "upstream", s.Upstream, "fix", "point --upstream at mempalace serve's /mcp (http://HOST:PORT/mcp)")
		return
	}
	s.upstreamRefuses(false)
	s.Log.Info("upstream answers", "upstream", s.Upstream)
	s.askPalace(ctx)
}

// askPalace learns the primary's palace directory from its /statusz
// (palace.sqlite_integrity, MemPalace 3.11), so that answers to a device
// that is not admin cut it whole before any status has named it
// (list_wings' error names it, never it whole). No answer leaves it to
// the status answers.
func (s *Server) askPalace(ctx context.Context) {
	where, err := beside(s.Upstream, "/statusz")
	if err != nil {
		return // checkUpstream refused it before
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return // as above
	}
	if tok := s.UpstreamToken(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return // the status answers teach it
	}
	defer resp.Body.Close() // read to maxPrealloc at most: a /statusz is a few kB
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPrealloc))
	if integrity, ok := gjson.GetBytes(b, "palace.sqlite_integrity").Value().(map[string]any); ok && err == nil && resp.StatusCode == http.StatusOK {
		s.learnPalace(integrity)
	}
}

// How often at most, and how long, an answer naming a path the gateway
// does not know as the palace's asks the primary's /statusz again.
const (
	relearnEvery = 10 * time.Second
	relearnWait  = 2 * time.Second
)

// relearnPalace asks the primary for its palace directory again
// (askPalace), once per relearnEvery at most, in the background: the
// gateway started before its primary, which is the order at boot, or the
// primary restarted on another palace (attack75 F2: list_wings then cut a
// path up to its first space). The answer that asked is not kept waiting
// (review25 F7); Close ends the ask and waits for it.
func (s *Server) relearnPalace() {
	now, last := s.Now(), s.palaceAsked.Load()
	if last != nil && now.Sub(*last) < relearnEvery || !s.palaceAsked.CompareAndSwap(last, &now) {
		return
	}
	s.relearning.Go(func() {
		ctx, cancel := context.WithTimeout(s.life, relearnWait)
		defer cancel()
		s.askPalace(ctx)
	})
}

// beside is the URL of route on upstream's server, where its /mcp is.
func beside(upstream, route string) (string, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return "", fmt.Errorf("upstream %q: %w", upstream, err)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/mcp") + route
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// upstreamLook is what one tools/list says of an upstream: the gateway's
// probe at start and trash restore's first look read it alike.
type upstreamLook struct {
	err     error // no answer (or no request to make)
	status  int   // 0: tools/list was not asked (a gateway's /healthz answered)
	gateway bool  // a devbox-config gateway answered (ledger.Advertised)
	mcp     bool  // the answer is an MCP tools/list result
}

// lookAtUpstream asks upstream for its tools, with token, unless a
// token-less /healthz beside it says a devbox-config gateway is there
// (gateway, status 0): the token is never sent to one.
func lookAtUpstream(ctx context.Context, client *http.Client, upstream, token string) upstreamLook {
	if gatewayAt(ctx, client, upstream) {
		return upstreamLook{gateway: true}
	}
	body := []byte(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, upstream, bytes.NewReader(body))
	if err != nil {
		return upstreamLook{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return upstreamLook{err: upstreamErr(err)}
	}
	defer resp.Body.Close() // read to its end, or not MCP: said below
	b, _ := readAnswer(resp, body, nil)
	_, out := answerOf(resp, b, body, func(s string) string { return redact.Secret(s, token) })
	return upstreamLook{status: resp.StatusCode, gateway: ledger.Advertised(resp.Header), mcp: gjson.GetBytes(out, "result.tools").IsArray()}
}

// gatewayAt asks the /healthz beside upstream's /mcp, with no token,
// whether a devbox-config gateway answers there (its answers carry the
// ledger's header), so that the shared upstream token is never sent to
// one (attack44 F8). No answer, or another, leaves it to tools/list.
func gatewayAt(ctx context.Context, client *http.Client, upstream string) bool {
	where, err := beside(upstream, "/healthz")
	if err != nil {
		return false // checkUpstream refused it before; tools/list says why
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return false // as above
	}
	resp, err := client.Do(req)
	if err != nil {
		return false // tools/list meets it too, and says what it means
	}
	resp.Body.Close() // only its header is read
	return ledger.Advertised(resp.Header)
}

// upstreamUse is a request's use of the upstream, which its context
// carries (upstreamUseKey): how long it had a call in flight (calls made
// at once, as a fan-out's, count once), the audit line's upstream_ms; and
// what its device may see of the upstream's errors: cut, set once the
// device is known not to be admin (Server.cutPaths), cuts URLs and
// absolute paths from its error answers, as status answers lose the
// primary's topology (cutTopology).
type upstreamUse struct {
	cut      func(string) string
	mu       sync.Mutex
	inFlight int
	since    time.Time
	total    time.Duration
	hungUp   bool  // a call ended unanswered by the request's cancel (callCut)
	held     *held // the request's bytes in flight, its answers' counted in (readAnswer); nil: none
}

type upstreamUseKey struct{}

// callCut notes on ctx's request a call to the upstream that ctx's
// cancel ended before its answer: the device hung up (a write runs
// without its device's cancel: writing). Its audit line then has no
// upstream_status: the status the gateway answers for the call is its
// own, not the primary's (finish).
func callCut(ctx context.Context) {
	if c, ok := ctx.Value(upstreamUseKey{}).(*upstreamUse); ok && errors.Is(ctx.Err(), context.Canceled) {
		c.mu.Lock()
		c.hungUp = true
		c.mu.Unlock()
	}
}

// wasCut reports a call callCut noted.
func (c *upstreamUse) wasCut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hungUp
}

func (c *upstreamUse) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight++; c.inFlight == 1 {
		c.since = time.Now()
	}
}

func (c *upstreamUse) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight--; c.inFlight == 0 {
		c.total += time.Since(c.since)
	}
}

// took is the time so far.
func (c *upstreamUse) took() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// maxAnswer bounds what is read of one upstream answer.
const maxAnswer = 64 << 20

// maxPrealloc bounds the buffer allocated for an upstream answer before
// any of it has arrived.
const maxPrealloc = 1 << 20

// postMCP POSTs one JSON-RPC message to an MCP endpoint with a bearer
// token. Its own errors answer under the message's id.
func postMCP(ctx context.Context, client *http.Client, url, token string, body []byte) (int, []byte) {
	clean := func(s string) string { return redact.Secret(s, token) }
	var h *held
	if c, ok := ctx.Value(upstreamUseKey{}).(*upstreamUse); ok {
		h = c.held
		c.start()
		defer c.stop()
		if c.cut != nil {
			clean = func(s string) string { return c.cut(redact.Secret(s, token)) }
		}
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return callFailed(body, http.StatusBadGateway, "upstream unreachable")
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	var wrote atomic.Bool // the request left whole: the upstream may have applied it
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) { wrote.Store(w.Err == nil) }}))
	resp, err := client.Do(req)
	if err != nil {
		callCut(ctx)
		if errors.Is(upstreamErr(err), errUpstreamRedirect) { // answered, not taken: nothing applied
			return callFailed(body, http.StatusServiceUnavailable, "upstream unreachable: not applied: "+errUpstreamRedirect.Error())
		}
		if !wrote.Load() { // never sent: the edge retries it as it is
			return callFailed(body, http.StatusServiceUnavailable, "upstream unreachable: not sent")
		}
		// Sent, no answer: 502, which the edge reads as "maybe applied".
		return callFailed(body, http.StatusBadGateway, "upstream answer lost: the upstream may have applied it")
	}
	defer resp.Body.Close() // read to its end, or it failed: reported below
	b, bad := readAnswer(resp, body, h)
	if bad != "" {
		callCut(ctx)
		return callFailed(body, http.StatusBadGateway, bad)
	}
	return answerOf(resp, b, body, clean)
}

// callFailed is the gateway's own error answer to the call body, under
// its id.
func callFailed(body []byte, status int, msg string) (int, []byte) {
	return status, rpcErrBytes(json.RawMessage(gjson.GetBytes(body, "id").Raw), -32000, msg)
}

// answerOf is what a device gets for resp, whose body b answers the
// call body: the JSON-RPC answer in it (unechoed), or the gateway's own
// error saying why there is none.
func answerOf(resp *http.Response, b, body []byte, clean func(string) string) (int, []byte) {
	if resp.StatusCode == http.StatusUnauthorized {
		// The device was authenticated here; passing the 401 on would send
		// its operator after the wrong token. 503, not 502: the upstream
		// refused the call before running it, so it was certainly not
		// applied (the ledger releases the op id, the edge sends it again
		// later) where a 502 would put a write in doubt.
		return callFailed(body, http.StatusServiceUnavailable, UpstreamRefused)
	}
	empty := len(bytes.TrimSpace(b)) == 0 // a notification's 202
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		b = sseAnswer(b, body)
	}
	code, ok2xx := resp.StatusCode, resp.StatusCode >= 200 && resp.StatusCode <= 299
	// Another id answers another call, but a 2xx: upstreamCall puts back
	// the device's id.
	if out, ok := unechoed(b, body, clean); ok && (ok2xx || gjson.GetBytes(b, "id").String() == gjson.GetBytes(body, "id").String()) {
		return code, out
	} else if empty && ok2xx {
		return code, nil
	}
	// Never passed on: a proxy or a debug page may repeat the request's
	// Authorization header, the gateway's upstream token. A 2xx or a 5xx
	// but 503 (busy, not run) and 504 (lost) is no answer to a call that
	// was sent: 502, maybe applied.
	msg := fmt.Sprintf("upstream answered HTTP %d %s, not a JSON-RPC answer", code, http.StatusText(code))
	if ok2xx || code >= 500 && code != http.StatusServiceUnavailable && code != http.StatusGatewayTimeout {
		code, msg = http.StatusBadGateway, msg+": the upstream may have applied it"
	}
	return callFailed(body, code, msg)
}

// overWhat is what an answer over maxAnswer leaves of the call sent: a
// write the upstream may have applied (the op-id ledger and the edge hold
// it in doubt); a read, or a protocol message, nothing, and the same ask
// is refused again (attack100 F7: a get_drawers whose answer passed
// 64 MiB was told it may have been applied).
func overWhat(sent []byte) string {
	if gjson.GetBytes(sent, "method").String() == "tools/call" {
		if t, known := catalogue.Lookup(gjson.GetBytes(sent, "params.name").String()); !known || !t.Reads {
			return "; the upstream may have applied it"
		}
	}
	return "; " + deviceinfo.ReadAskForLess + " (fewer ids, a smaller limit)"
}

// readAnswer reads an upstream answer's body whole, or says why it is
// no answer (bad): cut short, over maxAnswer (never forwarded as one),
// or, past its first smallBytes, over the bytes its request's device or
// the gateway may hold in flight (h; nil: not counted): each says what
// it leaves of the call sent.
func readAnswer(resp *http.Response, sent []byte, h *held) (b []byte, bad string) {
	// Read into a buffer of the answer's size (serve sends its length),
	// not one grown from 512 bytes by copying; up to maxPrealloc, as the
	// length is only what the answer says (a larger one grows as it comes).
	buf := bytes.NewBuffer(make([]byte, 0, min(max(resp.ContentLength, 0), maxPrealloc)+bytes.MinRead))
	r := &countedReader{r: io.LimitReader(resp.Body, maxAnswer+1), h: h}
	if _, err := buf.ReadFrom(r); r.refusal != "" {
		// what it leaves first: an edge reads the first 200 characters of
		// a refusal, and reads a read's "ask for less" as its cue to ask
		// in halves (attack103 F1: after the bound's words it never saw it)
		return nil, fmt.Sprintf("upstream answer refused after %d bytes%s: %s", buf.Len(), overWhat(sent), r.refusal)
	} else if err != nil {
		return nil, "upstream answer cut short"
	}
	if buf.Len() > maxAnswer { // nor is its first maxAnswer bytes
		return nil, fmt.Sprintf("upstream answer over %d MiB: refused%s", maxAnswer>>20, overWhat(sent))
	}
	return buf.Bytes(), ""
}

// countedReader counts what it reads past smallBytes in h, in whole MiBs
// (one lock a MiB at most); refusal: why it stopped, over a bound.
type countedReader struct {
	r             io.Reader
	h             *held
	read, counted int64
	refusal       string
}

var errOverHeld = errors.New("over the bytes in flight")

func (c *countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	if over := c.read - smallBytes - c.counted; c.h != nil && over > 0 {
		step := (over + 1<<20 - 1) >> 20 << 20 // whole MiBs
		if c.refusal = c.h.add(step); c.refusal != "" {
			return n, errOverHeld
		}
		c.counted += step
	}
	return n, err
}

// sseAnswer is the data of the event of an SSE body (text/event-stream)
// that answers sent (its id), its data lines joined by newlines; nil if
// none does.
func sseAnswer(b, sent []byte) []byte {
	id := gjson.GetBytes(sent, "id").String()
	for ev := range bytes.SplitSeq(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		var data [][]byte
		for l := range bytes.SplitSeq(ev, []byte("\n")) {
			if d, ok := bytes.CutPrefix(l, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(d, []byte(" ")))
			}
		}
		if d := bytes.Join(data, []byte("\n")); gjson.GetBytes(d, "id").String() == id {
			return d
		}
	}
	return nil
}

// unechoed is what a device gets for b, the upstream's answer to sent
// (an error under sent's id); ok false when b is no JSON-RPC answer: not
// one JSON object (a batch), neither a result nor an error object, a key
// twice in one object (a reader keeping the first and one keeping the
// last read two answers). An error is cleaned (clean): the gateway's
// upstream token is taken out (the upstream, or a proxy in front of it,
// may repeat the request's Authorization header, and no device may get
// the token), and for a device that is not admin the primary's URLs and
// paths (postMCP): a JSON-RPC error is rebuilt from its code, message
// and data, an isError tool result re-encoded, each cleaned. A successful answer
// is passed on as it came (a drawer may hold any text), after two scans
// of its bytes (valid, keys).
func unechoed(b, sent []byte, clean func(string) string) ([]byte, bool) {
	if !jsondepth.Valid(b) {
		return nil, false
	}
	result, errorKey, ok := keysOf(b)
	switch {
	case !ok:
		return nil, false
	case !errorKey:
		return b, result == '{'
	}
	a := gjson.ParseBytes(b)
	switch e, r := a.Get("error"), a.Get("result"); {
	case e.IsObject():
		var data any
		if d := e.Get("data"); d.Exists() {
			data = json.RawMessage(redact.JSONWith([]byte(d.Raw), clean))
		}
		id := json.RawMessage(gjson.GetBytes(sent, "id").Raw)
		return encodeJSON(rpcErr(id, int(e.Get("code").Int()), clean(e.Get("message").String()), data)), true
	case !r.IsObject():
		return nil, false
	case r.Get("isError").Bool():
		return redact.JSONWith(b, clean), true
	}
	return b, true
}

// keysOf reads b, one valid JSON value: the first byte of its "result"
// member's value (0: none), whether a key anywhere is "error" or
// "isError", and ok false when an object has a key twice (keys compared
// unescaped: "\u0065rror" is "error").
func keysOf(b []byte) (result byte, errorKey, ok bool) {
	var open []map[string]bool // each open object's keys (nil: an array)
	for {
		i := bytes.IndexAny(b, `"{}[]`)
		if i < 0 {
			return result, errorKey, true
		}
		c := b[i]
		b = b[i+1:]
		switch c {
		case '{':
			open = append(open, map[string]bool{})
		case '[':
			open = append(open, nil)
		case '}', ']':
			open = open[:len(open)-1]
		default:
			j := 0
			for { // to the quote that closes the string
				j += bytes.IndexByte(b[j:], '"')
				k := j
				for k > 0 && b[k-1] == '\\' {
					k--
				}
				if (j-k)%2 == 0 {
					break
				}
				j++
			}
			str, rest := b[:j], bytes.TrimLeft(b[j+1:], " \t\r\n")
			b = b[j+1:]
			if len(open) == 0 || open[len(open)-1] == nil || rest[0] != ':' {
				continue // a value
			}
			key := string(str)
			if bytes.IndexByte(str, '\\') >= 0 {
				json.Unmarshal(append(append([]byte{'"'}, str...), '"'), &key) // valid: checked
			}
			if keys := open[len(open)-1]; keys[key] {
				return 0, errorKey, false
			} else {
				keys[key] = true
			}
			errorKey = errorKey || key == "error" || key == "isError"
			if v := bytes.TrimLeft(rest[1:], " \t\r\n"); len(open) == 1 && key == "result" {
				result = v[0]
			}
		}
	}
}

// toolCall is a tools/call request with id.
func toolCall(id json.RawMessage, name string, args map[string]any) []byte {
	return encodeJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
}

// upstreamResult calls a tool on the upstream for the gateway's own use
// and returns its result object (nil if there is none).
func (s *Server) upstreamResult(ctx context.Context, name string, args map[string]any) map[string]any {
	return resultOf(s.upstreamBytes(ctx, name, args))
}

// upstreamBytes is the upstream's whole answer to a call for the
// gateway's own use.
func (s *Server) upstreamBytes(ctx context.Context, name string, args map[string]any) []byte {
	// every one is a read (get_drawer(s), list_*, a dry run, kg_query...)
	_, resp := s.upstreamCall(warmconn.WithReplayable(ctx), toolCall(json.RawMessage("0"), name, args))
	return resp
}

func resultOf(resp []byte) map[string]any {
	var r struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if json.Unmarshal(resp, &r) != nil || len(r.Result.Content) == 0 {
		return nil
	}
	var m map[string]any
	json.Unmarshal([]byte(r.Result.Content[0].Text), &m) // not an object: nil, "no result object"
	return m
}

// drawerWing asks the upstream which wing a drawer is in (ids are never
// parsed: wing names contain '_'): "" for an id that names none, and
// errNoAnswer when the primary did not answer (never taken for "none").
func (s *Server) drawerWing(ctx context.Context, id string) (string, error) {
	got := s.upstreamResult(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": id})
	if got == nil {
		return "", fmt.Errorf("%w get_drawer for %s", errNoAnswer, id)
	}
	w, _ := got["wing"].(string)
	return w, nil
}

// drawerWings is the wing of each drawer a delete by id names, in order
// ("" for an id that names none; errNoAnswer when the primary did not
// answer for one): get_drawers a batch at a time, get_drawer one by one
// from an upstream without it.
func (s *Server) drawerWings(ctx context.Context, args map[string]any) ([]string, error) {
	ids, _ := args["drawer_ids"].([]any)
	if id, ok := args["drawer_id"]; ok {
		ids = []any{id}
	}
	var wings []string
	for start := 0; start < len(ids); start += getBatch {
		batch := ids[start:min(start+getBatch, len(ids))]
		got, _ := s.upstreamResult(ctx, "mempalace_get_drawers", map[string]any{"drawer_ids": batch})["results"].([]any)
		for i, id := range batch {
			var w string
			if len(got) == len(batch) {
				p, _ := got[i].(map[string]any)
				w, _ = p["wing"].(string)
			} else if id, ok := id.(string); ok {
				var err error
				if w, err = s.drawerWing(ctx, id); err != nil {
					return nil, err
				}
			}
			wings = append(wings, w)
		}
	}
	return wings, nil
}

// forwardGET relays a GET route with the query rebuilt from what was
// checked (never the raw one), streaming the answer as it arrives (an SSE
// stream must not sit in a buffer). started is called with the status as
// soon as it is known, before the body is relayed.
func (s *Server) forwardGET(w http.ResponseWriter, r *http.Request, query string, withToken bool, started func(status int)) {
	fail := func() {
		callCut(r.Context())
		if r.Context().Err() == context.DeadlineExceeded { // /healthz's bound
			started(http.StatusGatewayTimeout)
			http.Error(w, "upstream did not answer in time", http.StatusGatewayTimeout)
			return
		}
		started(http.StatusBadGateway)
		http.Error(w, "upstream unreachable", http.StatusBadGateway)
	}
	u, err := url.Parse(s.Upstream)
	if err != nil {
		fail()
		return
	}
	u.Path, u.RawQuery = r.URL.Path, query
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		fail()
		return
	}
	if tok := s.UpstreamToken(); withToken && tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := s.stream.Do(req)
	if err != nil {
		fail()
		return
	}
	defer resp.Body.Close() // read to its end or the client gone: nothing to report
	if code := resp.StatusCode; withToken && (code < 200 || code > 299) {
		started(code)
		text, retry := s.upstreamRefusal(r, resp)
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		http.Error(w, text, code)
		return
	}
	started(resp.StatusCode)
	relay(w, resp)
}

// upstreamRefusal is the gateway's text for a GET route's answer that
// is not a success: its status, and the message of serve's JSON error
// ({"error": ...}: an unknown since_event_id, a filter it refuses), with
// the upstream token redacted and, for a device not admin, the primary's
// paths cut (its body is never passed on as it is), and its Retry-After:
// the primary's, but a stream's 503 says whose the slots are and when
// the gateway knows one frees (primaryFull).
func (s *Server) upstreamRefusal(r *http.Request, resp *http.Response) (text, retry string) {
	text = fmt.Sprintf("devbox-config gateway: the upstream answered HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	retry = resp.Header.Get("Retry-After")
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10)) // a short or cut body: no message, the status stands
	if msg := gjson.GetBytes(b, "error"); msg.Type == gjson.String && jsondepth.Valid(b) {
		clean := redact.Secret(msg.Str, s.UpstreamToken())
		if c, ok := r.Context().Value(upstreamUseKey{}).(*upstreamUse); ok && c.cut != nil {
			clean = c.cut(clean)
		}
		text += ": " + clean
	}
	if resp.StatusCode == http.StatusServiceUnavailable && r.URL.Path == "/logstream/stream" {
		full, wait := s.primaryFull(retry)
		text, retry = text+full, wait
	}
	return text, retry
}

// relay streams resp to w as it arrives: its status, the headers a GET
// route's client reads, and its body, flushed frame by frame.
func relay(w http.ResponseWriter, resp *http.Response) {
	for _, h := range []string{"Content-Type", "Cache-Control", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush() // the status and headers now, not with the first frame (an idle stream's comes 15 s later)
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return // a client that hung up, or a frame past its cap (stream.go)
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
