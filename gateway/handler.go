package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/warmconn"
)

// exchange is one request on its way through the steps: what the audit
// line will say, and whether the client has had its answer.
type exchange struct {
	w        http.ResponseWriter
	r        *http.Request
	start    time.Time
	entry    Entry
	id       json.RawMessage // the JSON-RPC id, once parsed
	answered bool            // the status line is out
	upstream upstreamUse     // time with an upstream call in flight (postMCP)
	audited  bool            // the request's audit line is written
	ahead    string          // the hash of a write's line written before it is made
	bodyRead bool            // the request's body was read to its end (closeUnread)
	auth     *authenticated  // its one Bearer token, checked once (authenticate); nil: not yet
}

// authenticated is what a request's token came to (AuthenticateWith).
type authenticated struct {
	d     *Device
	tok   *Token
	first bool
	err   error
}

// authenticate checks x's one Bearer token, once per request (the source
// count and the authenticate step both ask): ErrBadToken when there is
// none.
func (s *Server) authenticate(x *exchange) *authenticated {
	if x.auth == nil {
		x.auth = &authenticated{err: ErrBadToken}
		if raw, ok := bearer(x.r.Header.Get("Authorization")); ok && len(x.r.Header.Values("Authorization")) == 1 {
			a := x.auth
			a.d, a.tok, a.first, a.err = AuthenticateWith(s.cfg.Load(), s.state.firstUse, s.key, raw, s.Now())
		}
	}
	return x.auth
}

// ServeHTTP routes a request through its steps. Every request, on every
// path, ends in exactly one audit line, a panic included (answered with
// JSON-RPC -32603 when nothing was sent yet), or, a refusal repeated past
// its bound, is counted in one (refusals.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := &exchange{w: w, r: r, start: s.Now(), entry: Entry{Path: r.URL.Path, Method: r.Method}}
	x.entry.Time = x.start.UTC()
	x.r = r.WithContext(context.WithValue(r.Context(), upstreamUseKey{}, &x.upstream))
	defer s.recoverPanic(x)
	s.route(x)
}

func (s *Server) recoverPanic(x *exchange) {
	v := recover()
	if v == nil {
		return
	}
	s.Log.Error("request panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	x.entry.Rule = rulePanic
	if !x.answered {
		s.answer(x, http.StatusInternalServerError, rpcErrBytes(x.id, -32603, "Internal error"), VerdictError, rulePanic)
		return
	}
	if !x.audited {
		s.finish(x, VerdictError, rulePanic, http.StatusInternalServerError)
	}
}

// route is the front door (as mempalace serve's), then one route. A
// /sync path is forwarded as it is, so it must be clean: no dot or empty
// segment a proxy or the upstream would resolve to another route.
func (s *Server) route(x *exchange) {
	if !s.fromSource(x) {
		return
	}
	r := x.r
	if !hostAllowed(s.BindHost, r.Host) || !originAllowed(r.Header.Get("Origin")) {
		if s.counted(x) { // a valid token's device, as for a 404 (attack75 F3)
			s.answerText(x, http.StatusForbidden, "Forbidden", VerdictDeny, ruleFrontDoor)
		}
		return
	}
	switch p := r.URL.Path; {
	case p == "/healthz" && r.Method == http.MethodGet:
		if _, ok := s.queryStep(x, nil, nil); ok && s.counted(x) {
			s.serveHealthz(x)
		}
	case (p == "/statusz" || strings.HasPrefix(p, "/sync/") && path.Clean(p) == p) && r.Method == http.MethodGet:
		s.serveAdminGET(x)
	case p == "/logstream/stream" && r.Method == http.MethodGet:
		s.serveStream(x)
	case p != "/mcp" || r.Method != http.MethodPost:
		s.noRoute(x, p == "/mcp")
	default:
		s.serveMCP(x)
	}
}

// noRoute answers a request no route takes, counted against the device
// its token names: 404, or, on /mcp, the MCP spec's 405 (no server
// stream, GET; no session to end, DELETE).
func (s *Server) noRoute(x *exchange, mcpPath bool) {
	switch {
	case !s.counted(x):
	case !mcpPath:
		s.answerText(x, http.StatusNotFound, "Not Found", VerdictDeny, ruleNoRoute)
	default:
		x.w.Header().Set("Allow", http.MethodPost)
		s.answerText(x, http.StatusMethodNotAllowed, "Method Not Allowed", VerdictDeny, ruleNoRoute)
	}
}

// syncQuery lists each /sync route's query parameters (mempalace-surface
// §6.5); any other /sync path gets none.
var syncQuery = map[string][]string{"/sync/ops": {"origin", "after", "limit"}, "/sync/artifact": {"id"}}

// streamQuery lists /logstream/stream's filters and cursor (§6.6).
var streamQuery = []string{"stream", "room", "type", "to_agent", "from_agent", "correlation_id", "status", "topic", "since_event_id"}

func (s *Server) serveAdminGET(x *exchange) {
	d, ok := s.authenticateStep(x)
	if !ok || !s.limitGET(x, d) {
		return
	}
	q, ok := s.queryStep(x, syncQuery[x.r.URL.Path], nil)
	if !ok {
		return
	}
	switch {
	case !d.Admin:
		s.answerText(x, http.StatusForbidden, "admin only", VerdictDeny, ruleAdminOnly)
		return
	case !d.readsAll(): // the palace's counts, every agent's ops and artifacts
		s.answerText(x, http.StatusForbidden, ruleReadsAll.String(), VerdictDeny, ruleReadsAll)
		return
	}
	s.serveGET(x, rebuildQuery(q), true)
}

// serveStream authorizes /logstream/stream: a device streams only events
// addressed to one of its own agents (to_agent, which also matches
// broadcasts), unless it is a coordinator. The stream is relayed as it
// comes, frame by frame with each event's origin (stream.go), so it
// cannot be cut like event_list's answer; from_agent does not scope it
// (on the dev surface from_agent on event reads names the caller). A
// device holds at most its share of streams open (stream.go), and a
// stream ends when its token or its device's scope no longer stands.
func (s *Server) serveStream(x *exchange) {
	d, ok := s.authenticateStep(x)
	if !ok || !s.limitGET(x, d) {
		return
	}
	q, ok := s.queryStep(x, streamQuery, nil)
	if !ok || !s.resumeStep(x, q) {
		return
	}
	if to, padded := q["to_agent"]; padded {
		q["to_agent"] = catalogue.SanitizedName(to) // as MemPalace reads it, and event_list's
	}
	if !d.Coordinator && !d.Grants(q["to_agent"], false) {
		s.answerText(x, http.StatusForbidden, "filter the stream by to_agent naming one of this device's agents: "+agentList(d), VerdictDeny, ruleStreamAgent)
		return
	}
	raw, _ := bearer(x.r.Header.Get("Authorization")) // authenticated above
	ctx, cancel := context.WithCancel(x.r.Context())
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)() // EndStreams ends it
	h := &streamHold{device: d.ID, token: raw, scope: d.header, end: cancel, opened: s.Now()}
	over, ok := s.holdStream(x, d, h)
	if !ok {
		return
	}
	defer func() { // recheckStreams ends it on a revocation or a change of scope
		var freed time.Time
		if x.entry.UpstreamStatus == http.StatusOK {
			freed = s.Now().Add(upstreamSlotLinger)
		}
		s.open.done(h, freed)
	}()
	x.r = x.r.WithContext(ctx)
	x.w = s.originsOfStream(x.w, d)
	x.answered = true // as serveGET, the old streams over ended only once the primary answers (settleStream)
	s.forwardGET(x.w, x.r, rebuildQuery(q), true, func(status int) {
		x.entry.UpstreamStatus = status
		s.settleStream(x, d, h, over, status)
		s.finish(x, VerdictAllow, "", status)
	})
}

// agentList is d's agents as a refusal names them (%+q: a look-alike
// shows), or that it has none.
func agentList(d *Device) string {
	if len(d.Agents) == 0 {
		return "it has none (the operator gives it one: device set --agents)"
	}
	out := make([]string, len(d.Agents))
	for i, a := range d.Agents {
		out[i] = fmt.Sprintf("%+q", a)
	}
	return strings.Join(out, ", ")
}

// resumeStep takes a Last-Event-ID header, the cursor an SSE client
// resumes with on its own (RFC 003 §3.5), as since_event_id, which the
// upstream is sent (the gateway sends no client header on), filtered as
// any stream is; as the primary reads them, a since_event_id given too
// is the cursor. A repeated header is refused 400, as a repeated
// parameter is.
func (s *Server) resumeStep(x *exchange, q map[string]string) bool {
	ids := x.r.Header.Values("Last-Event-ID")
	if len(ids) > 1 {
		s.answerText(x, http.StatusBadRequest, fmt.Sprintf("devbox-config gateway: header Last-Event-ID given %d times (send one: the id of the last event the stream delivered)", len(ids)), VerdictDeny, ruleQuery)
		return false
	}
	if len(ids) == 1 && ids[0] != "" && q["since_event_id"] == "" {
		q["since_event_id"] = ids[0]
	}
	return true
}

// queryStep checks the request's query against the parameters its route
// takes (none for /healthz, /statusz and /mcp): a repeated or unknown one
// is answered 400, naming it and what the route takes. uncounted is the
// device of a request not yet counted against its rate (/mcp's: its
// method is not known yet), whose refusal counts as a read first.
func (s *Server) queryStep(x *exchange, allowed []string, uncounted *Device) (map[string]string, bool) {
	q, err := parseQuery(x.r.URL.RawQuery, allowed)
	if err == nil {
		return q, true
	}
	if uncounted != nil && !s.limitStep(x, uncounted, nil, false) {
		return nil, false
	}
	takes := "none"
	if len(allowed) > 0 {
		takes = strings.Join(allowed, ", ")
	}
	s.answerText(x, http.StatusBadRequest, fmt.Sprintf("devbox-config gateway: %s (%s takes %s)", err, x.r.URL.Path, takes), VerdictDeny, ruleQuery)
	return nil, false
}

// serveGET forwards a checked GET; its audit line is written when the
// upstream's status is known, before the body (a stream's may run for
// hours) is relayed.
func (s *Server) serveGET(x *exchange, query string, withToken bool) {
	x.answered = true
	s.forwardGET(x.w, x.r, query, withToken, func(status int) {
		x.entry.UpstreamStatus = status
		s.finish(x, VerdictAllow, "", status)
	})
}

// healthzBound is how long /healthz waits for the upstream's: within a
// client's own bound (doctor's is 1.5 s), so a hung upstream is told apart
// from a hung gateway.
const healthzBound = time.Second

// serveHealthz forwards /healthz within healthzBound; a failed or silent
// upstream is the gateway's 502 or 504, which says so. The answer carries
// the gateway's advertisement, as /mcp's do: a client tells the gateway's
// failure from the primary's.
func (s *Server) serveHealthz(x *exchange) {
	if s.Ledger != nil {
		ledger.Advertise(x.w.Header())
	}
	ctx, cancel := context.WithTimeout(x.r.Context(), healthzBound)
	defer cancel()
	x.answered = true
	s.forwardGET(x.w, x.r.WithContext(ctx), "", false, func(status int) {
		x.entry.UpstreamStatus = status
		s.finish(x, VerdictAllow, "", status)
	})
}

// admitStep is what a device's /mcp request passes before its body is
// read: its place among the device's requests in flight, and its body's
// bytes among theirs and every device's (a small body's among its
// device's only: smallBytes), its query, and a rate left; release
// follows a true, and the answers the request reads upstream are counted
// with its body (x.upstream.held). A device over both its rates is
// refused before the body, whatever it holds (attack71 F2: an over-rate
// device's requests each held a connection until the body deadline); it
// counts as a read.
func (s *Server) admitStep(x *exchange, d *Device) (release func(), ok bool) {
	size := min(x.r.ContentLength, MaxBody)
	if size < 0 { // chunked: as long as it may be
		size = MaxBody
	}
	h, refusal := s.flight.take(d.ID, size)
	if refusal != "" {
		s.quietPastFew(x, d, ruleInFlight)
		x.w.Header().Set("Retry-After", retryAfter)
		s.answer(x, http.StatusTooManyRequests, rpcErrBytes(nil, CodeRateLimited, "devbox-config gateway: "+refusal+"; nothing was read of this one: send it again when one ends"), VerdictLimited, ruleInFlight)
		return nil, false
	}
	if _, ok := s.queryStep(x, nil, d); !ok {
		h.release()
		return nil, false
	}
	if s.rates.spent(d, s.Now()) {
		s.limitStep(x, d, nil, false)
		h.release()
		return nil, false
	}
	x.upstream.held = h
	return h.release, true
}

// serveMCP is POST /mcp: authenticate, parse, then a protocol method is
// forwarded and a tools/call goes through the tool steps.
func (s *Server) serveMCP(x *exchange) {
	if s.Ledger != nil {
		ledger.Advertise(x.w.Header()) // every /mcp answer, refusals too
	}
	d, ok := s.authenticateStep(x)
	if !ok {
		return
	}
	x.w.Header().Set(deviceinfo.Header, d.header) // every authenticated /mcp answer
	release, ok := s.admitStep(x, d)
	if !ok {
		return
	}
	defer release()
	body, ok := s.readBody(x, d)
	if !ok {
		return
	}
	req, bad := parseRequest(body)
	if bad != nil {
		if req != nil {
			x.entry.Method, x.entry.Tool = req.Method, req.Tool
		}
		if s.limitStep(x, d, req, false) { // every request counts against a rate, refused or not
			msg := bad.msg + s.audit.cut(d.ID, bad.sent)
			s.answer(x, bad.httpStatus(), rpcErrBytes(req.rawID(), bad.code, msg), VerdictError, Rule("parse: "+msg))
		}
		return
	}
	x.entry.Method, x.id = req.Method, req.rawID()
	if req.Method != "tools/call" {
		if !s.limitStep(x, d, req, false) {
			return
		}
		if req.Method == "notifications/cancelled" {
			// Its requestId is the device's id, which never reaches the
			// upstream (it gets ids of the gateway's own): forwarded, it
			// would name nothing, or another device's call. A device ends
			// a call by hanging up, which ends the gateway's upstream call.
			s.answer(x, http.StatusAccepted, nil, VerdictAllow, ruleCancelDropped)
			return
		}
		// Protocol methods (initialize, ping, tools/list, notifications):
		// re-encoded from the parse like everything else.
		status, resp := s.upstreamCall(x.r.Context(), req.encode())
		if req.Method == "initialize" && s.Ledger != nil {
			resp = ledger.AdvertiseInitialize(resp)
		}
		if req.Method == "initialize" {
			resp = deviceinfo.AdvertiseInitialize(resp, s.cfg.Load().deviceInfo(d))
		}
		x.entry.UpstreamStatus = status
		s.answer(x, status, resp, VerdictAllow, ruleProtocol)
		return
	}
	s.serveTool(x, d, req)
}

// serveTool runs a tools/call through its steps: arguments, limit,
// authorize, object checks, the author of a write (record.go), audit
// ahead of a write, keep in the trash what a delete removes (keep.go),
// forward, filter (with each record's origin: origins.go), and record
// what a write made in the provenance index.
func (s *Server) serveTool(x *exchange, d *Device, req *rpcRequest) {
	ctx := x.r.Context()
	x.entry.Tool = req.Tool
	x.entry.ArgsDigest, req.sentDigest, req.sentLegacy = callDigests(s.audit.digestKey, d.ID, req.Tool, req.Args)
	t, _ := catalogue.Lookup(req.Tool)
	write := !t.Reads // unknown tools are writes
	if !s.limitStep(x, d, req, write) {
		return
	}
	t, ok := s.argsStep(x, d, req)
	if !ok {
		return
	}
	dec, ok := s.authorizeStep(ctx, x, d, req, t)
	if !ok {
		return
	}
	if !s.replayItemsStep(ctx, x, d, t, req) {
		return
	}
	if err := s.narrow(ctx, d, t, req.Args, &dec); err != nil {
		s.busy(x, d, req, ruleNoAnswer, err)
		return
	}
	author, ok := s.stampStep(ctx, x, d, t, req, write)
	if !ok {
		return
	}
	if write {
		var cancel context.CancelFunc
		ctx, cancel = writing(ctx)
		defer cancel()
	}
	release, ok := s.slotStep(ctx, x, d, t, req, dec.Wing)
	if !ok {
		return
	}
	defer release()
	k, ok := s.keepStep(ctx, x, d, t, req)
	if !ok {
		return
	}
	if k != nil {
		var cancel context.CancelFunc
		ctx, cancel = settling(ctx)
		defer cancel()
	}
	status, resp, err := s.forwardStep(ctx, d, t, dec, req)
	s.settle(ctx, k, status, resp)
	if err != nil {
		s.refuseForwarded(x, d, req, dec, err)
		return
	}
	if write {
		resp = s.writtenStep(ctx, d, author, t, req, status, resp)
	}
	s.answerForwarded(x, req, dec, status, resp)
}

// writtenStep records what a write made in the provenance index and
// answers one that found its drawer filed already in a wing the device
// does not read as a new filing (unread.go).
func (s *Server) writtenStep(ctx context.Context, d *Device, author *Device, t catalogue.Tool, req *rpcRequest, status int, resp []byte) []byte {
	if status == http.StatusOK || len(req.filed) > 0 {
		s.recordStep(ctx, d, author, t, req, resp)
	}
	if status != http.StatusOK || d.readsAll() {
		return resp
	}
	return unreadAsNew(d, t, req.Args, resp)
}

// answerForwarded answers a call the upstream answered: a checkpoint's
// replayed items left out are listed in it (replayitems.go), and the
// audit line's rule says so.
func (s *Server) answerForwarded(x *exchange, req *rpcRequest, dec Decision, status int, resp []byte) {
	if len(req.notFiled) > 0 && status == http.StatusOK {
		resp, x.entry.Rule = notFiledAnswer(resp, req.notFiled), ruleReplayDeleted
	}
	x.entry.UpstreamStatus = status
	x.entry.QueuedAs, x.entry.RecordOf = req.queuedAs, req.recordOf
	s.answer(x, status, resp, VerdictAllow, dec.Rule)
}

// slotStep holds the write slot through a call that destroys: what the
// trash keeps is what the delete removes, no other write lands between the
// look-up and the delete. release frees it (nothing, for any other call);
// false: no slot (queueRefusal), the call refused.
func (s *Server) slotStep(ctx context.Context, x *exchange, d *Device, t catalogue.Tool, req *rpcRequest, wing string) (release func(), ok bool) {
	if !destroys(t, req.Args) {
		return func() {}, true
	}
	if err := s.writes.acquire(clientOf(ctx), d.ID); err != nil {
		s.refuseQueued(x, d, req, err, wing)
		return nil, false
	}
	req.slotHeld = true
	return s.writes.release, true
}

// stampStep stamps the call with its author (a write's: authorStep, and
// a join's write checked by joinStep) and writes a write's audit line
// ahead of it; it answers the request itself when it refuses (ok false).
func (s *Server) stampStep(ctx context.Context, x *exchange, d *Device, t catalogue.Tool, req *rpcRequest, write bool) (author *Device, ok bool) {
	author = d
	if write {
		if author, ok = s.authorStep(x, d, req); !ok {
			return nil, false
		}
		if !s.joinStep(ctx, x, d, t, req) {
			return nil, false
		}
	}
	StampProvenance(author, req.Tool, req.Args)
	if write && !s.auditAhead(x, d, req) {
		return nil, false
	}
	return author, true
}

// argsStep looks the tool up in the catalogue and checks a known tool's
// arguments (a null name argument dropped first: dropNullNames); it answers the request itself when it refuses them (ok
// false). An unknown tool's record is the zero Tool.
func (s *Server) argsStep(x *exchange, d *Device, req *rpcRequest) (catalogue.Tool, bool) {
	t, known := catalogue.Lookup(req.Tool)
	if known {
		dropNullNames(t, req.Args)
		if bad := checkArgs(t, req.Args); bad != nil {
			s.refuse(x, d, req, bad.code, "devbox-config gateway: "+bad.msg+s.audit.cut(d.ID, bad.sent), ruleArguments, "")
			return t, false
		}
	}
	return t, true
}

// refuseForwarded answers a call whose forward step failed (err not nil):
// a message too large for the upstream (tooLarge), no write slot (queueRefusal), a denial, a look-up the
// primary did not answer (not sent: busy), or an answer the filter could
// not read.
func (s *Server) refuseForwarded(x *exchange, d *Device, req *rpcRequest, dec Decision, err error) {
	no, denied := errors.AsType[*denial](err)
	stale, changedThere := errors.AsType[*changed](err)
	_, queued := errors.AsType[*queueRefusal](err)
	_, large := errors.AsType[*tooLarge](err)
	switch {
	case large: // as a body over the cap is answered (readBody)
		x.entry.Wing, x.entry.Rule = dec.Wing, ruleSize
		s.answer(x, http.StatusRequestEntityTooLarge, rpcErrBytes(req.rawID(), -32600, err.Error()), VerdictError, ruleSize)
	case changedThere:
		s.refuse(x, d, req, stale.code, stale.msg, stale.rule, stale.wing)
	case queued:
		s.refuseQueued(x, d, req, err, dec.Wing)
	case denied:
		s.refuse(x, d, req, CodeDenied, fmt.Sprintf("devbox-config gateway: %s may not call %s (%s)", d.ID, req.Tool, err), no.rule, "")
	case errors.Is(err, errNoAnswer):
		s.busy(x, d, req, ruleNoAnswer, err)
	default:
		s.refuse(x, d, req, -32000, "devbox-config gateway: answer refused: "+err.Error(), "filter:unknown-shape", dec.Wing)
	}
}

// refuseQueued answers a write that got no write slot: nothing was sent.
// Its device may have hung up while it waited, which its line says.
func (s *Server) refuseQueued(x *exchange, d *Device, req *rpcRequest, err error, wing string) {
	if x.r.Context().Err() != nil {
		x.entry.Note = noteGoneQueued
	}
	s.refuse(x, d, req, CodeRateLimited, err.Error(), ruleWriteQueue, wing)
}

// errNotVisible: the answer is about an object the device may not see.
var errNotVisible = &denial{ruleNotVisible, ruleNotVisible.String()}

// forwardStep makes the authorized call and filters its answer: a
// palace-wide read that must be answered wing by wing is, an event_wait
// keeps waiting past events the device cannot see, an event_list page
// the filter cut is filled to its limit (evpage.go), artifact_get's
// answer is checked, and everything else goes to the upstream once
// (through the ledger) and through the filter step.
func (s *Server) forwardStep(ctx context.Context, d *Device, t catalogue.Tool, dec Decision, req *rpcRequest) (status int, out []byte, err error) {
	if t.Reads {
		ctx = warmconn.WithReplayable(ctx) // a read may be sent twice
	}
	if fanOut(d, t, req.Args) {
		return s.answerByWing(ctx, d, t, req)
	}
	sent := time.Now()  // real time: an event_wait's timeout runs from here
	var issued []string // the arguments that held a cursor the gateway sealed (evpage.go)
	if t.Name == "event_list" || t.Name == "event_wait" {
		var bad map[string]any
		if issued, bad = s.openCursors(d, req); bad != nil {
			return http.StatusOK, textAnswer(req.rawID(), bad), nil
		}
	}
	// A wait from a cursor the gateway gave this device waits from there;
	// from any other hidden event, from the log's end.
	if t.Name == "event_wait" && !d.Coordinator && len(issued) == 0 && !s.waitFromEnd(ctx, d, req) {
		return http.StatusOK, textAnswer(req.rawID(), map[string]any{"timed_out": true, "events": []any{}, "count": 0, "filtered": true}), nil
	}
	status, resp, replayed, err := s.forward(ctx, d, req)
	if err != nil {
		return status, nil, err // a write not sent: 503, which settle takes so
	}
	if replayed {
		// Marked after the filter (which reads MemPalace's envelope only).
		defer func() { out = markMeta(out, ledger.ReplayedKey) }()
	}
	if status != http.StatusOK {
		return status, resp, nil
	}
	if !s.objectAfter(ctx, d, t, req.Args, resp) {
		return 0, nil, errNotVisible
	}
	if t.Name == "event_wait" && !d.Coordinator {
		return s.waitVisible(ctx, d, t, req, sent, resp)
	}
	if t.Name == "event_list" && !d.Coordinator {
		resp = s.hiddenCursorPage(ctx, d, req, resp, issued)
	}
	out, err = s.filterAnswer(ctx, d, t, dec, req.rawID(), resp)
	if err == nil && t.Route == catalogue.CoordinationWrite {
		out = addresseeWarning(s.cfg.Load(), req.Args, out)
	}
	if t.Name == "event_list" && err == nil {
		out = s.fillPage(ctx, d, t, dec, req, resp, out)
	}
	if err == nil {
		out = s.refillPage(ctx, d, t, dec, req, out)
	}
	return status, out, err
}

// unauthorizedText is the body of every 401 the gateway answers a device.
const unauthorizedText = "devbox-config gateway: Unauthorized: this device's token (MEMPALACE_REMOTE_TOKEN) is missing, unknown, revoked or expired; devbox-config doctor on the device names the fix, and the operator issues a new one with devbox-config gateway token issue DEVICE"

// authenticateStep checks the bearer token; a first use is recorded in
// the state file (never the config). A failure is answered 401; more than
// one Authorization header, 400 (which one a proxy in between, or a log,
// takes for the credential is anyone's guess: none is looked at).
func (s *Server) authenticateStep(x *exchange) (*Device, bool) {
	if n := len(x.r.Header.Values("Authorization")); n > 1 {
		s.answerText(x, http.StatusBadRequest, fmt.Sprintf("devbox-config gateway: %d Authorization headers; send exactly one", n), VerdictDeny, ruleAuthAmbiguous)
		return nil, false
	}
	a := s.authenticate(x)
	d, tok, first := a.d, a.tok, a.first
	if a.err != nil {
		// One text for every reason (none, unknown, revoked, expired): a
		// guesser learns nothing; a person reading a client's log learns the
		// fix, where a bare "Unauthorized" sent MCP clients into OAuth errors.
		s.answerText(x, http.StatusUnauthorized, unauthorizedText, VerdictDeny, ruleAuthenticate)
		return nil, false
	}
	x.entry.Device, x.entry.TokenID = d.ID, tok.ID
	if !d.Admin {
		x.upstream.cut = s.cutPaths
	}
	if first {
		// The new token is now current; older ones start their grace period.
		if err := s.state.record(tok.ID, s.Now()); err != nil {
			s.Log.Error("could not record a token's first use", "err", err)
		}
	}
	return d, true
}

// named puts on x's line the device its one token names, if it names
// one, and reports whether it does: a refusal that needs no token (no
// route) says whose request it was (attack69 F10: a device probed routes
// with no trace naming it), and a request that names no device counts
// against its source (fromSource). Nothing else of the token is looked
// at: not its first use.
func (s *Server) named(x *exchange) bool {
	a := s.authenticate(x)
	if a.err != nil {
		return false
	}
	x.entry.Device, x.entry.TokenID = a.d.ID, a.tok.ID
	return true
}

// counted counts a request on a route that needs no token (no route,
// /healthz, a front-door refusal) against the read rate of the device its valid token names:
// over it, 429 (attack71 F6: a device wrote thousands of 404 lines a
// second, uncounted). A request naming none is counted by its source.
func (s *Server) counted(x *exchange) bool {
	if a := s.authenticate(x); a.err == nil {
		return s.limitGET(x, a.d)
	}
	return true
}

// fromSource counts a request that names no device against its source
// (refusals.go) and writes the lines a sweep made due; over the source's
// rate, the request is answered 429 with no line of its own.
func (s *Server) fromSource(x *exchange) bool {
	ok, due := s.refusals.take(x.r.RemoteAddr, s.Now(), s.named(x))
	s.appendAll(due)
	if ok {
		return true
	}
	x.answered, x.audited = true, true // counted in the source's next line
	closeUnread(x)
	http.Error(x.w, "devbox-config gateway: too many requests without a device's token from this address", http.StatusTooManyRequests)
	return false
}

// appendAll writes lines that are no request's (a read's: not fsync'd).
func (s *Server) appendAll(lines []Entry) {
	for _, e := range lines {
		if err := s.audit.Append(e, false); err != nil {
			s.Log.Error("audit log not writable", "err", err)
		}
	}
}

// bearer is the credentials of an Authorization value whose scheme is
// Bearer, in any case (RFC 9110 §11.1), after one or more spaces.
func bearer(h string) (string, bool) {
	scheme, raw, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(raw, " "), true
}

// readBody reads at most MaxBody of d's request (413 beyond it, as
// upstream); a body refused counts as a read against d's rate first, as
// one that does not parse.
func (s *Server) readBody(x *exchange, d *Device) ([]byte, bool) {
	refuse := func(status int, code int, msg string, rule Rule, read int64) ([]byte, bool) {
		if s.limitStep(x, d, nil, false) {
			if status == http.StatusRequestEntityTooLarge {
				drainOver(x, read)
			}
			s.answer(x, status, rpcErrBytes(nil, code, msg), VerdictError, rule)
		}
		return nil, false
	}
	if x.r.ContentLength > MaxBody {
		return refuse(http.StatusRequestEntityTooLarge, -32600, "Request too large", ruleSize, 0)
	}
	rc := http.NewResponseController(x.w)
	within := s.bodyTime(x.r.ContentLength)
	_ = rc.SetReadDeadline(time.Now().Add(within)) // a connection that takes none (HTTP/2): the server's own timeouts
	// Into a buffer of the length declared (within MaxBody, and counted in
	// the device's bodies in flight), not one grown by copying.
	buf := bytes.NewBuffer(make([]byte, 0, max(x.r.ContentLength, 0)+bytes.MinRead))
	_, err := buf.ReadFrom(io.LimitReader(x.r.Body, MaxBody+1))
	body := buf.Bytes()
	x.bodyRead = err == nil
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{}) // no deadline on the read that notices a client hanging up (an event_wait's, a queued write's)
	}
	if len(body) > MaxBody {
		return refuse(http.StatusRequestEntityTooLarge, -32600, "Request too large", ruleSize, int64(len(body)))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return refuse(http.StatusRequestTimeout, ledger.CodeBodyTimeout, lateBody(x.r.ContentLength, within), ruleRead, 0)
	}
	if err != nil {
		return refuse(http.StatusBadRequest, -32700, "Parse error", ruleRead, 0)
	}
	return body, true
}

// bodyGrace and bodyRate bound how long a request's body may take to
// arrive: bodyGrace, plus its length at bodyRate (512 kbit/s), so a
// 16 MiB write has 4 min 26 s and a small body about 10 s. A client that
// sends part of its body and stops is answered 408 and its connection
// closed (attack69 F5: it held one, and its goroutine, for good); an
// upload at a slow link's pace still arrives in full.
const (
	bodyGrace = 10 * time.Second
	bodyRate  = 64 << 10 // bytes a second
)

// lateBody says that a body of n bytes (-1: not declared) did not arrive
// within its time, what that floor is, and what gets such a write through.
func lateBody(n int64, within time.Duration) string {
	size := "its length not declared"
	if n >= 0 {
		size = fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("devbox-config gateway: Request Timeout: the body (%s) did not arrive within %s, the gateway's floor of 10 s plus its length at 64 KiB/s (512 kbit/s), which no setting raises: not read, nothing applied. Over a link slower than that a write this big never arrives in time: send it over a faster link, or write it smaller", size, within.Round(time.Millisecond))
}

// bodyTime is how long a body of n bytes (-1: not declared, as chunked:
// MaxBody's) may take to arrive.
func (s *Server) bodyTime(n int64) time.Duration {
	if n < 0 {
		n = MaxBody
	}
	grace := cmp.Or(s.bodyGrace, bodyGrace)
	return grace + time.Duration(n)*time.Second/bodyRate
}

// closeUnread makes an answer given before the request's body was read
// (a refusal of its host, its token, its route, its rate) the
// connection's last, and reads no more of that body: net/http reads up
// to 256 KiB of what is left before it sends the answer, and again when
// the handler returns, so a client that sent a few bytes of its body and
// stopped got no 401 and kept its connection for good (attack69 F5).
func closeUnread(x *exchange) {
	if x.bodyRead || x.r.ContentLength == 0 {
		return
	}
	x.w.Header().Set("Connection", "close")
	_ = http.NewResponseController(x.w).SetReadDeadline(time.Now()) // a connection that takes none (HTTP/2): the server's own timeouts
}

// drainOver reads and drops the rest of a body over the cap (read bytes
// of it read already), up to twice MaxBody in all, within drainTime, so a
// client that writes its whole body before it reads (Python's
// http.client, curl without Expect) gets the 413 rather than a broken
// pipe: net/http closes a connection with more than 256 KiB unread, and
// the reset can reach the client before the answer. A longer body is not
// read: its client gets the reset. A device over its rate gets no drain
// (its refusal is the rate's).
func drainOver(x *exchange, read int64) {
	if x.r.ContentLength > 2*MaxBody {
		return
	}
	// A deadline the connection may not take (HTTP/2) leaves the drain to
	// the server's own timeouts.
	_ = http.NewResponseController(x.w).SetReadDeadline(time.Now().Add(drainTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(x.r.Body, 2*MaxBody-read)) // what is dropped needs no error
}

// drainTime bounds drainOver: 16 MiB at about 2 MB/s.
const drainTime = 8 * time.Second

// limitStep applies the device's read or write rate to every request it
// sends, before its arguments are checked or its wing is resolved (a by-id
// wing would cost an upstream call). A request that is not a tools/call,
// or that does not parse (req nil or partial), counts as a read; a
// non-admin checkpoint costs a write an item (batch), and one carrying
// more than maxBatchBytes of content is refused (it counts as one write).
func (s *Server) limitStep(x *exchange, d *Device, req *rpcRequest, write bool) bool {
	if req == nil {
		req = &rpcRequest{}
	}
	cost, n := 1, 0
	if write {
		items := batch(d, req)
		cost, n = max(1, min(len(items), burstOf(d, true))), contentBytes(items)
	}
	if n > maxBatchBytes && s.rates.allow(d, write, 1, s.Now()) {
		s.refuse(x, d, req, CodeDenied, fmt.Sprintf("devbox-config gateway: a checkpoint of %d bytes of content is more than the %d a device may file in one call (the call holds the primary's single write slot while its items are embedded); nothing was written: send them as smaller checkpoints", n, maxBatchBytes), ruleBatchCap, "")
		return false
	}
	if s.rates.allow(d, write, cost, s.Now()) {
		return true
	}
	rule := ruleRateRead
	if write {
		rule = ruleRateWrite
	}
	s.quietPastFew(x, d, rule)
	wing, _ := req.Args["wing"].(string)
	s.refuse(x, d, req, CodeRateLimited, fmt.Sprintf("devbox-config gateway: %s is over its %s rate", d.ID, strings.TrimPrefix(rule.String(), "rate:")), rule, wing)
	return false
}

// limitGET counts an authenticated GET against the device's read rate;
// over it, the answer is 429.
func (s *Server) limitGET(x *exchange, d *Device) bool {
	if s.rates.allow(d, false, 1, s.Now()) {
		return true
	}
	s.quietPastFew(x, d, ruleRateRead)
	s.answerText(x, http.StatusTooManyRequests, fmt.Sprintf("devbox-config gateway: %s is over its read rate", d.ID), VerdictLimited, ruleRateRead)
	return false
}

// quietPastFew leaves a device's refusal by its rate, its requests in
// flight or its share of streams without a line of its own past its
// first few since the last sweep: the device's next sweep line counts it
// (refusals.go).
func (s *Server) quietPastFew(x *exchange, d *Device, rule Rule) {
	if !s.refusals.lined(d.ID, rule, s.Now()) {
		x.audited = true
	}
}

// authorizeStep resolves a by-id wing, applies the catalogue's gate and
// the object checks that must come before the call.
func (s *Server) authorizeStep(ctx context.Context, x *exchange, d *Device, req *rpcRequest, t catalogue.Tool) (Decision, bool) {
	var drawerWing string
	var err error
	if t.Wings == catalogue.DrawerWing {
		id, _ := req.Args["drawer_id"].(string)
		drawerWing, err = s.drawerWing(ctx, id)
	}
	dec := Authorize(d, req.Tool, req.Args, drawerWing)
	if err == nil && !dec.Allow && dec.Rule == ruleNotVisible && drawerWing == "" && t.Gate == catalogue.WriteWing && !s.updateStep(ctx, x, d, t, req) {
		return dec, false
	}
	if err == nil && dec.Allow && deletesByID(t) && !(d.readsAll() && d.writesAll()) {
		var wings []string
		wings, err = s.drawerWings(ctx, req.Args)
		dec = authorizeDrawers(d, wings)
		if id, _ := req.Args["drawer_id"].(string); err == nil && t.Name == "delete_drawer" && dec.Rule == ruleNotVisible && id != "" && wings[0] == "" && !s.restoredStep(ctx, x, d, t, req, id) {
			return dec, false
		}
	}
	if err == nil && dec.Allow {
		dec, err = s.objectBefore(ctx, d, t, req.Args, dec)
	}
	if err == nil && dec.Allow && t.Name == "create_tunnel" {
		dec, err = s.tunnelBefore(ctx, req.Args, dec)
	}
	if err != nil {
		s.busy(x, d, req, ruleNoAnswer, err)
		return dec, false
	}
	x.entry.Wing, x.entry.Rule = dec.Wing, dec.Rule
	if !dec.Allow {
		msg := fmt.Sprintf("devbox-config gateway: %s may not call %s (%s)", d.ID, req.Tool, dec.Rule)
		if dec.why != "" {
			msg = "devbox-config gateway: " + dec.why
		}
		s.refuse(x, d, req, CodeDenied, msg, dec.Rule, dec.Wing)
		return dec, false
	}
	return dec, true
}

// ruleNoAnswer: the primary did not answer a look-up the gateway makes
// before the call (errNoAnswer), so the call was not made.
const ruleNoAnswer Rule = "upstream:no-answer"

// busy answers a call the gateway did not make because the primary did
// not answer a look-up it needed first (errNoAnswer): HTTP 503, as the
// primary being busy, which an edge's outbox backs off on and sends again,
// never a refusal (an outbox takes -31003 as final: attack26 F3).
func (s *Server) busy(x *exchange, d *Device, req *rpcRequest, rule Rule, err error) {
	msg := fmt.Sprintf("devbox-config gateway: %s: %v; nothing was written: send it again later", req.Tool, err)
	s.answer(x, http.StatusServiceUnavailable, encodeJSON(rpcErr(req.rawID(), -32000, msg, map[string]any{"device": d.ID, "tool": req.Tool, "rule": rule})), VerdictError, rule)
}

// auditAhead writes a write's line durably before the write is made: a
// write that cannot be audited is not made (fail closed).
func (s *Server) auditAhead(x *exchange, d *Device, req *rpcRequest) bool {
	probe := x.entry
	probe.Decision = VerdictPending
	var err error
	if x.ahead, err = s.audit.appendLine(probe, true); err != nil {
		s.Log.Error("audit log not writable: refusing writes", "err", err)
		x.answered = true
		writeRawJSON(x.w, 200, encodeJSON(rpcErr(req.rawID(), CodeDenied, "devbox-config gateway: the audit log cannot be written; writes are refused", map[string]any{"device": d.ID, "tool": req.Tool, "rule": ruleAudit})))
		x.audited = true // the log is what failed
		return false
	}
	return true
}

// refuse answers a tools/call with a JSON-RPC error naming device, tool,
// wing and rule (in an HTTP 200: a 4xx would make clients drop every
// palace tool) and audits it as a denial (with CodeRateLimited, as
// limited: a client retries).
// The audit line keeps the wing of an object the device may not see; the
// answer does not.
func (s *Server) refuse(x *exchange, d *Device, req *rpcRequest, code int, msg string, rule Rule, wing string) {
	x.entry.Rule, x.entry.Wing = rule, wing
	verdict := VerdictDeny
	if code == CodeRateLimited {
		verdict = VerdictLimited
	}
	if rule == ruleNotVisible {
		wing = ""
	}
	s.answer(x, 200, encodeJSON(rpcErr(req.rawID(), code, msg, map[string]any{"device": d.ID, "tool": req.Tool, "wing": s.audit.cut(d.ID, wing), "rule": rule})), verdict, rule)
}

// answer writes a JSON answer and the request's audit line.
func (s *Server) answer(x *exchange, status int, body []byte, decision Verdict, rule Rule) {
	x.answered = true
	closeUnread(x)
	writeRawJSON(x.w, status, body)
	s.finish(x, decision, rule, status)
}

// answerText writes a plain-text answer (as upstream's send_error) and
// the request's audit line.
func (s *Server) answerText(x *exchange, status int, msg string, decision Verdict, rule Rule) {
	x.answered = true
	closeUnread(x)
	http.Error(x.w, msg, status)
	s.finish(x, decision, rule, status)
}

// finish is the audit step's last line for a request.
func (s *Server) finish(x *exchange, decision Verdict, rule Rule, status int) {
	if x.audited {
		return
	}
	x.audited = true
	e := x.entry
	e.Decision, e.Status = decision, status
	// The client's connection closed before its answer; not a 408 or 413,
	// whose body read the gateway itself cut off (its deadline ends the
	// request's context too).
	if x.r.Context().Err() != nil && status != http.StatusRequestTimeout && status != http.StatusRequestEntityTooLarge {
		note := noteClientGone
		// A call the hang-up cut: the status is the gateway's own (a
		// write the primary answered after a cut look-up keeps its 2xx).
		if x.upstream.wasCut() && e.UpstreamStatus/100 != 2 {
			e.UpstreamStatus, note = 0, noteGoneCut
		}
		e.Status, e.Note = StatusClientGone, cmp.Or(e.Note, note)
	}
	if e.Rule == "" {
		e.Rule = rule
	}
	e.LatencyMS = float64(s.Now().Sub(x.start).Microseconds()) / 1000
	e.UpstreamMS = float64(x.upstream.took().Microseconds()) / 1000
	if err := s.audit.Append(e, false); err != nil {
		s.Log.Error("audit log not writable", "err", err)
	}
}

func writeRawJSON(w http.ResponseWriter, code int, b []byte) {
	if code == http.StatusAccepted && len(b) == 0 {
		w.WriteHeader(code)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b))) // not chunked
	w.WriteHeader(code)
	w.Write(b) // a client that hung up: its audit line is written all the same
}
