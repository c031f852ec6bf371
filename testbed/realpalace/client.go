package realpalace

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CallTimeout bounds one request to a MemPalace process (its first
// embedding, on a loaded two-core machine, takes seconds).
const CallTimeout = 60 * time.Second

// Client speaks JSON-RPC to one MemPalace server, over stdio or HTTP.
type Client struct {
	send func(ctx context.Context, msg []byte) ([]byte, error)
	next atomic.Int64
}

// Response is a JSON-RPC answer.
type Response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// RPCError is a JSON-RPC error answer.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC %d: %s", e.Code, e.Message) }

// Send sends one raw JSON-RPC message and returns the raw answer (nil for
// a notification, which gets none).
func (c *Client) Send(msg []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	return c.send(ctx, msg)
}

// RPC calls method with params (nil: none) under a fresh id.
func (c *Client) RPC(method string, params any) (*Response, error) {
	m := map[string]any{"jsonrpc": "2.0", "id": c.next.Add(1), "method": method}
	if params != nil {
		m["params"] = params
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	raw, err := c.Send(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	var r Response
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: the answer is not JSON-RPC: %q", method, raw)
	}
	return &r, nil
}

// Call runs a tool (its full name, e.g. "mempalace_add_drawer") and
// decodes the answer's text block as JSON. A JSON-RPC error comes back as
// *RPCError; MemPalace's in-band failures ({"success": false, ...},
// {"error": ...}) come back as the decoded object.
func (c *Client) Call(tool string, args map[string]any) (map[string]any, error) {
	if args == nil {
		args = map[string]any{}
	}
	r, err := c.RPC("tools/call", map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return nil, err
	}
	if r.Error != nil {
		return nil, r.Error
	}
	var res struct {
		Content []struct{ Type, Text string } `json:"content"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || len(res.Content) == 0 {
		return nil, fmt.Errorf("%s: no text block in %s", tool, r.Result)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(res.Content[len(res.Content)-1].Text), &out); err != nil {
		return nil, fmt.Errorf("%s: the text is not a JSON object: %q", tool, res.Content[len(res.Content)-1].Text)
	}
	return out, nil
}

// MustCall is Call that fails the test on a JSON-RPC or transport error.
func (c *Client) MustCall(t testing.TB, tool string, args map[string]any) map[string]any {
	t.Helper()
	out, err := c.Call(tool, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return out
}

// Tool is one entry of tools/list.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

// Tools is the server's tools/list.
func (c *Client) Tools() ([]Tool, error) {
	r, err := c.RPC("tools/list", map[string]any{})
	if err != nil {
		return nil, err
	}
	if r.Error != nil {
		return nil, r.Error
	}
	var res struct {
		Tools []Tool `json:"tools"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	return res.Tools, nil
}

// Seed makes each call and fails the test on an error or an in-band
// failure ("success": false, "error"); it returns the answers in order.
// Drawer, DiaryEntry and Fact make the usual calls.
func (c *Client) Seed(t testing.TB, calls ...Call) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(calls))
	for i, x := range calls {
		r := c.MustCall(t, x.Tool, x.Args)
		if r["success"] == false || r["error"] != nil {
			t.Fatalf("seeding %s %v: %v", x.Tool, x.Args, r)
		}
		out[i] = r
	}
	return out
}

// Call is one tool call.
type Call struct {
	Tool string
	Args map[string]any
}

// Drawer is an add_drawer call.
func Drawer(wing, room, content string) Call {
	return Call{"mempalace_add_drawer", map[string]any{"wing": wing, "room": room, "content": content}}
}

// DiaryEntry is a diary_write call in the agent's own diary wing.
func DiaryEntry(agent, entry string) Call {
	return Call{"mempalace_diary_write", map[string]any{"agent_name": agent, "entry": entry}}
}

// Fact is a kg_add call; validTo "" makes an open fact.
func Fact(subject, predicate, object, validFrom, validTo string) Call {
	a := map[string]any{"subject": subject, "predicate": predicate, "object": object}
	if validFrom != "" {
		a["valid_from"] = validFrom
	}
	if validTo != "" {
		a["valid_to"] = validTo
	}
	return Call{"mempalace_kg_add", a}
}

// HTTPClient is a Client for any MCP endpoint speaking MemPalace's HTTP
// transport (serve, a gateway, a proxy in front of them): it posts each
// message to url with the bearer (serve closes every connection after
// its answer).
func HTTPClient(url, token string) *Client {
	hc := &http.Client{Timeout: CallTimeout}
	return &Client{send: func(ctx context.Context, msg []byte) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(msg))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusAccepted && len(b) == 0 {
			return nil, nil
		}
		if resp.StatusCode != http.StatusOK {
			return b, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
		}
		return b, nil
	}}
}

// Stdio is a stdio MemPalace server (mempalace-mcp) on pipes.
type Stdio struct {
	*Client
	proc  *proc
	stdin io.WriteCloser
	lines chan []byte // answers, in order; closed at EOF
	mu    sync.Mutex  // one request in flight: answers come back in order
}

func startStdio(argv, env []string, mark string, g *groups) (*Stdio, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	pr, err := startProc(argv, env, mark, g, inR, outW)
	if err != nil {
		return nil, err
	}
	s := &Stdio{proc: pr, stdin: inW, lines: make(chan []byte, 16)}
	go func() { <-pr.done; outW.Close(); inR.Close() }()
	go func() { // owned by the process: ends at its stdout's EOF
		defer close(s.lines)
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				s.lines <- bytes.TrimSpace(line)
			}
			if err != nil {
				return
			}
		}
	}()
	s.Client = &Client{send: s.roundTrip}
	// Ready when it answers: a ping (no initialize is needed).
	if _, err := s.RPC("ping", nil); err != nil {
		stopErr := s.Stop()
		return nil, fmt.Errorf("%s: %w (stop: %v)\n%s", argv[0], err, stopErr, pr.log.String())
	}
	return s, nil
}

func (s *Stdio) roundTrip(ctx context.Context, msg []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.stdin.Write(append(bytes.TrimSpace(msg), '\n')); err != nil {
		return nil, fmt.Errorf("writing to %s: %w\n%s", s.proc.cmd.Path, err, s.proc.log.String())
	}
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &probe) == nil && probe.ID == nil && !bytes.HasPrefix(bytes.TrimSpace(msg), []byte("[")) {
		return nil, nil // a notification: no answer comes
	}
	select {
	case line, ok := <-s.lines:
		if !ok {
			return nil, fmt.Errorf("%s closed its output%s", s.proc.cmd.Path, tail(s.proc.log.String()))
		}
		return line, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no answer from %s: %w%s", s.proc.cmd.Path, ctx.Err(), tail(s.proc.log.String()))
	}
}

// Stop closes the server's input (it exits at EOF), then ends its process
// group (SIGTERM, SIGKILL after 5 s) and reports anything left behind.
func (s *Stdio) Stop() error {
	s.stdin.Close()
	select {
	case <-s.proc.done:
	case <-time.After(5 * time.Second):
	}
	return s.proc.stop(5 * time.Second)
}

func tail(log string) string {
	if log = strings.TrimSpace(log); log == "" {
		return ""
	}
	if len(log) > 4000 {
		log = "..." + log[len(log)-4000:]
	}
	return "; its log:\n" + log
}
