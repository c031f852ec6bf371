package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// JSON-RPC codes of the gateway's own refusals. A denial is permanent (an
// edge's outbox gives up on it); a rate limit is in the server range that
// clients retry.
const (
	CodeDenied      = -31003
	CodeRateLimited = -32029
)

// MaxBody is mempalace serve's request cap.
const MaxBody = 16 << 20

// Server is the gateway's HTTP handler.
type Server struct {
	ConfigFile string
	Upstream   string // the upstream's MCP endpoint, e.g. http://127.0.0.1:8765/mcp
	// UpstreamToken returns the shared upstream token (read per request).
	UpstreamToken func() string
	BindHost      string // the listen host, for the loopback Host pin
	Log           *slog.Logger
	Now           func() time.Time

	cfg    atomic.Pointer[Config]
	key    []byte
	audit  *Audit
	client *http.Client
	mtime  time.Time

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	writes   chan struct{} // one write at a time to the single-writer primary
	queued   atomic.Int32
}

// Open loads the configuration, the secret and the audit log.
func (s *Server) Open() error {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	if err := s.Reload(); err != nil {
		return err
	}
	key, err := LoadSecret(s.cfg.Load().SecretFile)
	if err != nil {
		return fmt.Errorf("secret_file: %w", err)
	}
	s.key = key
	if s.audit, err = OpenAudit(s.cfg.Load().AuditLog); err != nil {
		return fmt.Errorf("audit_log: %w", err)
	}
	if f := s.cfg.Load().SigningKeyFile; f != "" {
		if s.audit.key, err = SigningKey(f); err != nil {
			return fmt.Errorf("signing_key_file: %w", err)
		}
	}
	s.client = &http.Client{Timeout: 5 * time.Minute}
	s.limiters = map[string]*rate.Limiter{}
	s.writes = make(chan struct{}, 1)
	return nil
}

// Reload re-reads the configuration; a bad file keeps the old one.
func (s *Server) Reload() error {
	c, err := LoadConfig(s.ConfigFile)
	if err != nil {
		return err
	}
	s.cfg.Store(c)
	s.markSeen()
	s.mu.Lock()
	s.limiters = map[string]*rate.Limiter{} // new rates apply at once
	s.mu.Unlock()
	return nil
}

// markSeen records the config file's current mtime, so Watch reloads only
// on a change it has not seen (or made itself).
func (s *Server) markSeen() {
	if fi, err := os.Stat(s.ConfigFile); err == nil {
		s.mu.Lock()
		s.mtime = fi.ModTime()
		s.mu.Unlock()
	}
}

// Watch reloads when the file changes (polled every 200 ms, so a
// revocation takes effect within a second) until ctx ends.
func (s *Server) Watch(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			seen := s.mtime
			s.mu.Unlock()
			if fi, err := os.Stat(s.ConfigFile); err == nil && !fi.ModTime().Equal(seen) {
				if err := s.Reload(); err != nil {
					s.Log.Error("config change not applied", "err", err)
					s.markSeen()
				} else {
					s.Log.Info("config reloaded")
				}
			}
		}
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !hostAllowed(s.BindHost, r.Host) || !originAllowed(r.Header.Get("Origin")) {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	switch {
	case r.URL.Path == "/healthz" && r.Method == http.MethodGet:
		s.forwardRaw(w, r, false)
		return
	case r.URL.Path == "/statusz" || strings.HasPrefix(r.URL.Path, "/sync/"):
		d, _, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		if !d.Admin {
			http.Error(w, "admin only", http.StatusForbidden)
			return
		}
		s.forwardRaw(w, r, true)
		return
	case r.URL.Path == "/logstream/stream" && r.Method == http.MethodGet:
		// Authorized like event_list: a device streams only events to or
		// from its own agents (as a filter it must give), unless it is a
		// coordinator.
		d, _, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		q := r.URL.Query()
		mine := false
		for _, a := range d.Agents {
			mine = mine || q.Get("to_agent") == a || q.Get("from_agent") == a
		}
		if !d.Coordinator && !mine {
			http.Error(w, "filter the stream by to_agent or from_agent naming one of this device's agents", http.StatusForbidden)
			return
		}
		s.forwardRaw(w, r, true)
		return
	case r.URL.Path != "/mcp":
		http.NotFound(w, r)
		return
	case r.Method != http.MethodPost:
		http.Error(w, "only POST /mcp", http.StatusNotFound)
		return
	}
	if r.ContentLength > MaxBody {
		writeJSON(w, 413, rpcErr(nil, -32600, "Request too large", nil))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil || len(body) > MaxBody {
		writeJSON(w, 413, rpcErr(nil, -32600, "Request too large", nil))
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, 400, rpcErr(nil, -32700, "Parse error", nil))
		return
	}
	d, tok, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	start := s.Now()
	entry := Entry{Time: start.UTC(), Device: d.ID, TokenID: tok.ID, Method: req.Method}
	finish := func(decision string, status int) {
		entry.Decision, entry.UpstreamStatus = decision, status
		entry.LatencyMS = float64(s.Now().Sub(start).Microseconds()) / 1000
		if err := s.audit.Append(entry, false); err != nil {
			s.Log.Error("audit log not writable", "err", err)
		}
	}
	if req.Method != "tools/call" {
		// Protocol methods (initialize, ping, tools/list, notifications).
		status, resp := s.upstreamCall(r.Context(), body)
		finish("allow", status)
		writeRawJSON(w, status, resp)
		return
	}
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	json.Unmarshal(req.Params, &p)
	if p.Arguments == nil {
		p.Arguments = map[string]any{}
	}
	entry.Tool, entry.ArgsDigest = p.Name, digest(p.Arguments)
	t := strings.TrimPrefix(p.Name, "mempalace_")
	write := writeTools[t] || kgWrite[t] || coordWrite[t] || !(readWingless[t] || kgRead[t] || coordRead[t] || t == "get_drawer")

	if !s.allowRate(d, write) {
		// Checked before the wing is resolved (a by-id wing would cost an
		// upstream call): the wing the call names, if any.
		entry.Rule, entry.Wing = "rate:read", argWing(p.Arguments)
		if write {
			entry.Rule = "rate:write"
		}
		finish("limited", 0)
		writeJSON(w, 200, rpcErr(req.ID, CodeRateLimited, fmt.Sprintf("devbox-config gateway: %s is over its %s rate", d.ID, strings.TrimPrefix(entry.Rule, "rate:")),
			map[string]any{"device": d.ID, "tool": p.Name, "wing": entry.Wing, "rule": entry.Rule}))
		return
	}
	drawerWing := ""
	if t == "get_drawer" || t == "update_drawer" {
		// Never parse the id (wing names contain '_'): ask the upstream.
		drawerWing = s.drawerWing(r.Context(), fmt.Sprint(p.Arguments["drawer_id"]))
	}
	dec := Authorize(d, p.Name, p.Arguments, drawerWing)
	entry.Wing, entry.Rule = dec.Wing, dec.Rule
	if !dec.Allow {
		finish("deny", 0)
		writeJSON(w, 200, rpcErr(req.ID, CodeDenied, fmt.Sprintf("devbox-config gateway: %s may not call %s (%s)", d.ID, p.Name, dec.Rule),
			map[string]any{"device": d.ID, "tool": p.Name, "wing": dec.Wing, "rule": dec.Rule}))
		return
	}
	if write {
		// Fail closed: a write that cannot be audited is not made.
		probe := entry
		probe.Decision = "pending"
		if err := s.audit.Append(probe, true); err != nil {
			s.Log.Error("audit log not writable: refusing writes", "err", err)
			writeJSON(w, 200, rpcErr(req.ID, CodeDenied, "devbox-config gateway: the audit log cannot be written; writes are refused", map[string]any{"device": d.ID, "tool": p.Name, "rule": "audit"}))
			return
		}
		if !s.acquireWrite(r.Context()) {
			entry.Rule = "write_queue"
			finish("limited", 0)
			writeJSON(w, 200, rpcErr(req.ID, CodeRateLimited, "devbox-config gateway: rate limited: the primary's write queue is full",
				map[string]any{"device": d.ID, "tool": p.Name, "wing": dec.Wing, "rule": entry.Rule}))
			return
		}
		defer func() { <-s.writes }()
	}
	StampProvenance(d, p.Name, p.Arguments)
	status, resp := s.upstreamCall(r.Context(), toolCall(req.ID, p.Name, p.Arguments))
	if status == 200 && (dec.Filter || dec.Events) {
		var rooms map[string]any
		if (t == "list_rooms" && dec.Wing == "") || t == "status" {
			rooms = s.readableRooms(r.Context(), d)
		}
		resp = filterResponse(resp, t, d, dec, rooms)
	}
	finish("allow", status)
	writeRawJSON(w, status, resp)
}

// argWing is the wing a call's arguments name ("" if none).
func argWing(args map[string]any) string {
	w, _ := args["wing"].(string)
	return w
}

func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (*Device, *Token, bool) {
	h := r.Header.Get("Authorization")
	raw, ok := strings.CutPrefix(h, "Bearer ")
	cfg := s.cfg.Load()
	d, t, first, err := func() (*Device, *Token, bool, error) {
		if !ok {
			return nil, nil, false, ErrBadToken
		}
		return Authenticate(cfg, s.key, raw, s.Now())
	}()
	if err != nil {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return nil, nil, false
	}
	if first {
		// A new token is now current; the older one starts its grace period.
		if err := cfg.Save(s.ConfigFile); err != nil {
			s.Log.Error("could not record a token's first use", "err", err)
		} else {
			s.markSeen()
		}
	}
	return d, t, true
}

func (s *Server) allowRate(d *Device, write bool) bool {
	key, r, burst := d.ID+"/read", d.ReadRate, 100
	if r == 0 {
		r = 50
	}
	if write {
		key, r, burst = d.ID+"/write", d.WriteRate, 20
		if r == 0 {
			r = 10
		}
	}
	s.mu.Lock()
	l := s.limiters[key]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(r), max(burst, int(r)))
		s.limiters[key] = l
	}
	s.mu.Unlock()
	return l.Allow()
}

// acquireWrite takes the single write slot, with a short bounded queue.
func (s *Server) acquireWrite(ctx context.Context) bool {
	if s.queued.Add(1) > 8 {
		s.queued.Add(-1)
		return false
	}
	defer s.queued.Add(-1)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case s.writes <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) upstreamCall(ctx context.Context, body []byte) (int, []byte) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.Upstream, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok := s.UpstreamToken(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return http.StatusBadGateway, rpcErrBytes(nil, -32000, "upstream unreachable")
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// toolCall is a tools/call request with id.
func toolCall(id json.RawMessage, name string, args map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	return b
}

// upstreamResult calls a tool on the upstream for the gateway's own use
// and returns its result object (nil if there is none).
func (s *Server) upstreamResult(ctx context.Context, name string, args map[string]any) map[string]any {
	_, resp := s.upstreamCall(ctx, toolCall(json.RawMessage("0"), name, args))
	return resultOf(resp)
}

func (s *Server) drawerWing(ctx context.Context, id string) string {
	w, _ := s.upstreamResult(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": id})["wing"].(string)
	return w
}

// readableRooms recomputes room counts over the wings a device may read,
// from the upstream's wing -> room -> count taxonomy.
func (s *Server) readableRooms(ctx context.Context, d *Device) map[string]any {
	tax, _ := s.upstreamResult(ctx, "mempalace_get_taxonomy", map[string]any{})["taxonomy"].(map[string]any)
	rooms := map[string]any{}
	for wing, rs := range tax {
		if !match(d.Read, wing) {
			continue
		}
		rm, _ := rs.(map[string]any)
		for room, n := range rm {
			f, _ := n.(float64)
			prev, _ := rooms[room].(float64)
			rooms[room] = prev + f
		}
	}
	return rooms
}

func (s *Server) forwardRaw(w http.ResponseWriter, r *http.Request, withToken bool) {
	u, _ := url.Parse(s.Upstream)
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, u.String(), nil)
	if tok := s.UpstreamToken(); withToken && tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		http.Error(w, "upstream unreachable", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Cache-Control", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	// Relay as it arrives (an SSE stream must not sit in a buffer).
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// ---- result filtering ----

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
	json.Unmarshal([]byte(r.Result.Content[0].Text), &m)
	return m
}

// filterResponse cuts a result to the wings (or agents) the device may see
// and marks it filtered.
func filterResponse(resp []byte, tool string, d *Device, dec Decision, rooms map[string]any) []byte {
	var env map[string]any
	if json.Unmarshal(resp, &env) != nil {
		return resp
	}
	m := resultOf(resp)
	if m == nil {
		return resp
	}
	keep := func(w any) bool { s, _ := w.(string); return match(d.Read, s) }
	cut := func(key string, ok func(map[string]any) bool) int {
		list, _ := m[key].([]any)
		out := []any{}
		for _, x := range list {
			if h, _ := x.(map[string]any); h != nil && ok(h) {
				out = append(out, h)
			}
		}
		m[key] = out
		return len(list) - len(out)
	}
	dropped := 0
	switch tool {
	case "search":
		dropped = cut("results", func(h map[string]any) bool { return keep(h["wing"]) })
	case "check_duplicate":
		dropped = cut("matches", func(h map[string]any) bool { return keep(h["wing"]) })
		if ms, _ := m["matches"].([]any); len(ms) == 0 {
			m["is_duplicate"] = false
		}
	case "list_drawers":
		dropped = cut("drawers", func(h map[string]any) bool { return keep(h["wing"]) })
		m["count"] = len(m["drawers"].([]any))
	case "list_wings", "status", "get_taxonomy":
		for _, key := range []string{"wings", "taxonomy"} {
			if ws, ok := m[key].(map[string]any); ok {
				total := 0.0
				for w, n := range ws {
					if !keep(w) {
						delete(ws, w)
						dropped++
					} else if f, ok := n.(float64); ok {
						total += f
					}
				}
				if tool == "status" && key == "wings" {
					m["total_drawers"] = total
					m["rooms"] = rooms
				}
			}
		}
	case "list_rooms":
		if dec.Wing == "" {
			m["rooms"] = rooms // recomputed over the readable wings
			dropped = 1
		}
	case "event_list", "event_wait":
		mine := map[string]bool{"*": true}
		for _, a := range d.Agents {
			mine[a] = true
		}
		dropped = cut("events", func(e map[string]any) bool {
			to, _ := e["to_agent"].(string)
			from, _ := e["from_agent"].(string)
			return mine[to] || mine[from]
		})
		m["count"] = len(m["events"].([]any))
	}
	if dropped > 0 {
		m["filtered"] = true
	}
	text, _ := json.MarshalIndent(m, "", "  ")
	env["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}}
	out, _ := json.Marshal(env)
	return out
}

// ---- front door (as mempalace serve) ----

var loopback = map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true}

func hostAllowed(bind, host string) bool {
	if !loopback[strings.Trim(bind, "[]")] {
		return true
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	return loopback[strings.Trim(h, "[]")] || h == bind
}

func originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && loopback[u.Hostname()]
}

func rpcErr(id json.RawMessage, code int, msg string, data any) map[string]any {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": e}
}

func rpcErrBytes(id json.RawMessage, code int, msg string) []byte {
	b, _ := json.Marshal(rpcErr(id, code, msg, nil))
	return b
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	writeRawJSON(w, code, b)
}

func writeRawJSON(w http.ResponseWriter, code int, b []byte) {
	if code == http.StatusAccepted && len(b) == 0 {
		w.WriteHeader(code)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b)
}
