package fakepalace

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ServeStdio speaks MemPalace's stdio wire: newline-delimited JSON, one
// response line per request, no reply to notifications or to a line that is
// not JSON, return on EOF.
func (pl *Palace) ServeStdio(r io.Reader, w io.Writer, logw io.Writer) error {
	br := bufio.NewReaderSize(r, 1<<20)
	bw := bufio.NewWriter(w)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if pl.trace != nil {
				pl.traceMessage(line)
			}
			resp, herr := pl.Handle(line)
			if errors.Is(herr, ErrParse) {
				fmt.Fprintf(logw, "fakepalace: ignoring a line that is not JSON (%d bytes)\n", len(line))
			} else if pl.maxAnswer > 0 && len(resp) > pl.maxAnswer {
				return fmt.Errorf("an answer of %d bytes, over the %d of FAKEPALACE_MAX_ANSWER: not written", len(resp), pl.maxAnswer)
			} else if resp != nil {
				bw.Write(resp)
				bw.WriteByte('\n')
				if ferr := bw.Flush(); ferr != nil {
					return ferr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// MaxRequestBytes is _HTTP_MAX_REQUEST_BYTES.
const MaxRequestBytes = 16 << 20

// FaultKind is how a request fails.
type FaultKind string

const (
	// Fail5xx answers 503.
	Fail5xx FaultKind = "5xx"
	// FailReset closes the connection without an answer.
	FailReset FaultKind = "reset"
	// FailInternal answers a tools/call, unapplied, with MemPalace's
	// JSON-RPC -32000 "Internal tool error" (a handler that raised, e.g.
	// database is locked).
	FailInternal FaultKind = "internal"
	// FailErrorField answers a tools/call, unapplied, with HTTP 200 and a
	// result whose JSON is {"error": "database is locked"}.
	FailErrorField FaultKind = "error-field"
	// FailSuccessFalse answers a tools/call, unapplied, with HTTP 200 and
	// {"success": false, "error": ...} (RFC 003 §7.6).
	FailSuccessFalse FaultKind = "success-false"
)

// HTTPOptions configure the HTTP wire.
type HTTPOptions struct {
	// Token is the bearer token; empty means no authentication (upstream's
	// loopback default).
	Token string
	// SessionMode issues and requires Mcp-Session-Id, as the fork on the
	// official Python SDK does; an unknown session is a 404.
	SessionMode bool
	// CutAnswersAt, when set, sends an answer longer than that many bytes
	// cut to them: what a client that reads at most its cap (the edge's
	// 64 MiB) sees of a longer one, so that a test reaches the cap without
	// writing 64 MiB.
	CutAnswersAt int
}

// HTTPServer is `mempalace serve`: POST /mcp only, JSON responses, no
// sessions (unless SessionMode), /healthz, /statusz, Host and Origin rules,
// a 16 MiB cap; plus test-only /_fake/control and /_fake/dump.
type HTTPServer struct {
	pl   *Palace
	opts HTTPOptions

	mu             sync.Mutex
	addr           string
	ln             net.Listener
	srv            *http.Server
	serving        sync.WaitGroup // the Serve loop; Stop waits for it
	sessions       map[string]bool
	failNext       int
	failKind       FaultKind
	dropAfterApply map[string]int       // tool ("" = any) -> calls left to drop
	failTool       map[string]toolFault // tool -> calls left to refuse, and how
	byStatus       map[int]int
	total          int
	started        time.Time
}

// NewHTTP wraps a palace in the HTTP wire.
func (pl *Palace) NewHTTP(opts HTTPOptions) *HTTPServer {
	return &HTTPServer{pl: pl, opts: opts, sessions: map[string]bool{}, byStatus: map[int]int{}, dropAfterApply: map[string]int{}, failTool: map[string]toolFault{}}
}

// Start listens on addr ("127.0.0.1:0" picks a port). After Stop, Start
// with "" listens again on the same address.
func (h *HTTPServer) Start(addr string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if addr == "" {
		addr = h.addr
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the old socket may linger a moment after Stop
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	h.ln, h.addr, h.started = ln, ln.Addr().String(), time.Now()
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	srv := h.srv
	h.serving.Add(1)
	go func() {
		defer h.serving.Done()
		srv.Serve(ln) // always ErrServerClosed after Stop: nothing to report
	}()
	return nil
}

// Stop closes the listener and every connection and waits for the Serve
// loop: the primary is down. A handler held by SetHold or a latency goes
// on until released (its answer then meets a closed connection); Stop does
// not wait for it, so a test may stop a primary while a call is held.
func (h *HTTPServer) Stop() {
	h.mu.Lock()
	srv := h.srv
	h.srv = nil
	h.mu.Unlock()
	if srv != nil {
		srv.Close() // closing the listener and connections cannot fail in a way a test acts on
		h.serving.Wait()
	}
}

// Addr is host:port; URL is the MCP endpoint.
func (h *HTTPServer) Addr() string { h.mu.Lock(); defer h.mu.Unlock(); return h.addr }
func (h *HTTPServer) URL() string  { return "http://" + h.Addr() + "/mcp" }

// FailNext makes the next n POST /mcp requests fail with kind.
func (h *HTTPServer) FailNext(n int, kind FaultKind) {
	h.mu.Lock()
	h.failNext, h.failKind = n, kind
	h.mu.Unlock()
}

// DropAfterApply makes the next n tools/call requests run (the write
// lands) and then drops the connection without an answer: the client sees
// a failure for a write that happened (RFC 001 §4.3, RFC 003 §7.1).
func (h *HTTPServer) DropAfterApply(n int) { h.DropAfterApplyTool("", n) }

// DropAfterApplyTool is DropAfterApply for calls of one tool only, so a
// client's own look-ups still get their answers.
func (h *HTTPServer) DropAfterApplyTool(tool string, n int) {
	h.mu.Lock()
	h.dropAfterApply[tool] = n
	h.mu.Unlock()
}

type toolFault struct {
	n    int
	kind FaultKind
}

// FailTool makes the next n tools/call requests of one tool fail without
// being applied, answered as kind says (FailInternal, FailErrorField,
// FailSuccessFalse): a look-up that errs, a write the palace refused.
func (h *HTTPServer) FailTool(tool string, n int, kind FaultKind) {
	h.mu.Lock()
	h.failTool[tool] = toolFault{n, kind}
	h.mu.Unlock()
}

func (h *HTTPServer) takeToolFault(tool string) (FaultKind, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.failTool[tool]
	if f.n <= 0 {
		return "", false
	}
	f.n--
	h.failTool[tool] = f
	return f.kind, true
}

// toolFaultAnswer is the answer to a refused tools/call with id.
func toolFaultAnswer(id json.RawMessage, kind FaultKind) []byte {
	switch kind {
	case FailInternal:
		return encode(id, nil, &rpcError{Code: -32000, Message: "Internal tool error", Data: map[string]any{"error_class": "OperationalError", "message": "database is locked"}})
	case FailErrorField:
		return encode(id, textContent(map[string]any{"error": "database is locked"}), nil)
	}
	return encode(id, textContent(map[string]any{"success": false, "error": "another mine is in progress: try again"}), nil)
}

// ExpireSessions forgets every session (session mode): the next request
// with an old id gets 404 and the client must initialize again.
func (h *HTTPServer) ExpireSessions() {
	h.mu.Lock()
	h.sessions = map[string]bool{}
	h.mu.Unlock()
}

func (h *HTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, status: 200}
	h.serve(rec, r)
	h.mu.Lock()
	h.total++
	h.byStatus[rec.status]++
	h.mu.Unlock()
}

func (h *HTTPServer) serve(w *statusRecorder, r *http.Request) {
	w.Header().Set("Connection", "close")
	if !h.hostAllowed(r.Host) || !originAllowed(r.Header.Get("Origin")) {
		httpError(w, http.StatusForbidden, "Forbidden")
		return
	}
	if r.URL.Path != "/mcp" {
		h.servePath(w, r)
		return
	}
	if r.Method != http.MethodPost {
		h.serveMethod(w, r)
		return
	}
	if !h.authorized(w, r) {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	if kind, ok := h.takeFault(); ok {
		if kind == FailReset {
			hijackClose(w)
			return
		}
		httpError(w, http.StatusServiceUnavailable, "Service Unavailable")
		return
	}
	var peek peeked
	json.Unmarshal(body, &peek)
	if h.opts.SessionMode && !h.session(w, r, peek.Method) {
		return
	}
	h.answer(w, body, peek)
}

// peeked is what serve reads of a message before the palace handles it.
type peeked struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// servePath answers a path other than /mcp: health, status, the test
// controls, else 404.
func (h *HTTPServer) servePath(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/healthz" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	case r.URL.Path == "/statusz" && r.Method == http.MethodGet:
		if h.authorized(w, r) {
			h.statusz(w)
		}
	case r.URL.Path == "/_fake/control" && r.Method == http.MethodPost:
		if h.authorized(w, r) {
			h.control(w, r)
		}
	case r.URL.Path == "/_fake/dump" && r.Method == http.MethodGet:
		if h.authorized(w, r) {
			writeJSON(w, 200, h.pl.Dump())
		}
	default:
		httpError(w, http.StatusNotFound, "Not Found")
	}
}

// serveMethod answers a request to /mcp other than a POST: GET has no
// stream; DELETE ends a session in SessionMode.
func (h *HTTPServer) serveMethod(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		if h.opts.SessionMode {
			httpError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		} else {
			httpError(w, http.StatusNotFound, "Not Found") // no server-initiated stream
		}
	case http.MethodDelete:
		if h.opts.SessionMode && h.authorized(w, r) {
			h.mu.Lock()
			delete(h.sessions, r.Header.Get("Mcp-Session-Id"))
			h.mu.Unlock()
			w.WriteHeader(http.StatusOK)
		} else if !h.opts.SessionMode {
			httpError(w, http.StatusNotImplemented, "Unsupported method")
		}
	default:
		httpError(w, http.StatusNotImplemented, "Unsupported method")
	}
}

// tooLarge is the answer to a request over MaxRequestBytes.
const tooLarge = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Request too large"}}`

// readBody is a POST's body; false when it answered instead: too large, or
// not JSON.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > MaxRequestBytes || r.ContentLength < -1 {
		writeRaw(w, http.StatusRequestEntityTooLarge, []byte(tooLarge))
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil || len(body) > MaxRequestBytes {
		writeRaw(w, http.StatusRequestEntityTooLarge, []byte(tooLarge))
		return nil, false
	}
	if !json.Valid(body) {
		writeRaw(w, http.StatusBadRequest, []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`))
		return nil, false
	}
	return body, true
}

// session starts a session on initialize and otherwise requires a known
// one; false when it answered instead.
func (h *HTTPServer) session(w http.ResponseWriter, r *http.Request, method string) bool {
	sid := r.Header.Get("Mcp-Session-Id")
	if method == "initialize" {
		sid = randHex(16)
		h.mu.Lock()
		h.sessions[sid] = true
		h.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
		return true
	}
	h.mu.Lock()
	known := h.sessions[sid]
	h.mu.Unlock()
	if sid == "" {
		writeRaw(w, http.StatusBadRequest, []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}`))
		return false
	}
	if !known {
		writeRaw(w, http.StatusNotFound, []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`))
		return false
	}
	return true
}

// answer has the palace handle the message, with the tool faults and
// drops a test set, and writes its answer (202 for a notification).
func (h *HTTPServer) answer(w http.ResponseWriter, body []byte, peek peeked) {
	if h.pl.trace != nil {
		h.pl.traceMessage(body)
	}
	if peek.Method == "tools/call" {
		if kind, ok := h.takeToolFault(peek.Params.Name); ok {
			writeRaw(w, http.StatusOK, toolFaultAnswer(peek.ID, kind))
			return
		}
	}
	resp, _ := h.pl.Handle(body)
	if peek.Method == "tools/call" && h.takeDrop(peek.Params.Name) {
		hijackClose(w)
		return
	}
	if resp == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if n := h.opts.CutAnswersAt; n > 0 && len(resp) > n {
		resp = resp[:n]
	}
	writeRaw(w, http.StatusOK, resp)
}

func (h *HTTPServer) takeFault() (FaultKind, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failNext <= 0 {
		return "", false
	}
	h.failNext--
	return h.failKind, true
}

func (h *HTTPServer) takeDrop(tool string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range []string{tool, ""} {
		if h.dropAfterApply[k] > 0 {
			h.dropAfterApply[k]--
			return true
		}
	}
	return false
}

// authorized checks the exact header `Authorization: Bearer <token>` in
// constant time; 401 with no WWW-Authenticate otherwise.
func (h *HTTPServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.opts.Token == "" {
		return true
	}
	got := r.Header.Get("Authorization")
	want := "Bearer " + h.opts.Token
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 {
		return true
	}
	httpError(w, http.StatusUnauthorized, "Unauthorized")
	return false
}

var loopbackNames = map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true, "[::1]": true}

// hostAllowed pins Host when bound to loopback (anti DNS rebinding).
func (h *HTTPServer) hostAllowed(host string) bool {
	bindHost, port, _ := net.SplitHostPort(h.Addr())
	if !loopbackNames[bindHost] {
		return true
	}
	name := host
	if hh, p, err := net.SplitHostPort(host); err == nil {
		if p != port {
			return false
		}
		name = hh
	}
	return loopbackNames[name] || loopbackNames["["+name+"]"] || name == bindHost
}

func originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	return loopbackNames[u.Hostname()]
}

func (h *HTTPServer) statusz(w http.ResponseWriter) {
	h.mu.Lock()
	by := map[string]int{}
	for k, v := range h.byStatus {
		by[strconv.Itoa(k)] = v
	}
	out := map[string]any{
		"ok":       true,
		"server":   map[string]any{"name": "mempalace", "version": h.pl.opts.Version, "transport": "http", "scheme": "http", "started_at": h.started.UTC().Format(time.RFC3339), "uptime_seconds": time.Since(h.started).Seconds()},
		"palace":   map[string]any{"backend": "fakepalace", "sqlite_integrity": map[string]any{"ok": true}},
		"writer":   map[string]any{"read_only": h.pl.readOnly()},
		"requests": map[string]any{"total": h.total, "by_status": by},
	}
	h.mu.Unlock()
	writeJSON(w, 200, out)
}

// control is the test-only fault switchboard, for a primary that runs as a
// separate process.
func (h *HTTPServer) control(w http.ResponseWriter, r *http.Request) {
	var c struct {
		LatencyMS      map[string]int `json:"latency_ms"`
		FailNext       int            `json:"fail_next"`
		FailKind       FaultKind      `json:"fail_kind"`
		DropAfterApply int            `json:"drop_after_apply"`
		DropTool       string         `json:"drop_tool"`
		FailTool       string         `json:"fail_tool"`
		FailToolNext   int            `json:"fail_tool_next"`
		FailToolKind   FaultKind      `json:"fail_tool_kind"`
		ReadOnly       *bool          `json:"read_only"`
		ExpireSessions bool           `json:"expire_sessions"`
	}
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		writeJSON(w, 400, map[string]any{"error": err.Error()})
		return
	}
	for t, ms := range c.LatencyMS {
		h.pl.SetLatency(t, time.Duration(ms)*time.Millisecond)
	}
	if c.FailNext > 0 {
		h.FailNext(c.FailNext, cmp.Or(c.FailKind, Fail5xx))
	}
	if c.DropAfterApply > 0 {
		h.DropAfterApplyTool(c.DropTool, c.DropAfterApply)
	}
	if c.FailTool != "" {
		h.FailTool(c.FailTool, c.FailToolNext, c.FailToolKind)
	}
	if c.ReadOnly != nil {
		h.pl.SetReadOnly(*c.ReadOnly)
	}
	if c.ExpireSessions {
		h.ExpireSessions()
	}
	writeJSON(w, 200, map[string]any{"ok": true})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return s.ResponseWriter.(http.Hijacker).Hijack()
}

func hijackClose(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // a reset, not a clean close
			}
			c.Close()
		}
	}
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html;charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, "<html><body><h1>Error response</h1><p>Error code: %d</p><p>Message: %s.</p></body></html>\n", code, msg)
}

func writeRaw(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, code, b)
}

// IsLoopbackAddr reports whether a listen address is loopback (the
// program's "token required off loopback" rule).
func IsLoopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		h = addr
	}
	if loopbackNames[h] {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}
