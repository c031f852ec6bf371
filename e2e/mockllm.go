// Package e2e proves the whole journey a user makes with real software
// nobody here wrote: opencode as the harness, driven by a mock model that
// makes it call MemPalace tools, through every rung of the ladder.
package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ToolCall is one scripted call the mock model makes.
type ToolCall struct {
	Name string
	Args map[string]any
}

// MockLLM speaks just enough of the OpenAI chat-completions API (streaming
// and not) for opencode: on a user turn it answers with the next scripted
// tool call, after the tool result it answers with text. It records the
// tool names offered and every tool result it was sent.
type MockLLM struct {
	mu      sync.Mutex
	script  []ToolCall
	offered [][]string
	systems []string // the system messages of each request that offered tools
	results []string
	srv     *http.Server
	URL     string
}

// StartMockLLM listens on loopback.
func StartMockLLM() (*MockLLM, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &MockLLM{URL: "http://" + ln.Addr().String() + "/v1"}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	return m, nil
}

// Close stops the server.
func (m *MockLLM) Close() { m.srv.Close() }

// Next scripts the tool call of the next user turn.
func (m *MockLLM) Next(c ToolCall) {
	m.mu.Lock()
	m.script = append(m.script, c)
	m.mu.Unlock()
}

// LastOffered is the tool list of the latest request that carried tools.
func (m *MockLLM) LastOffered() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.offered) == 0 {
		return nil
	}
	return m.offered[len(m.offered)-1]
}

// LastSystem is the system messages (joined) of the latest request that
// offered tools: what the model was told besides the user's turn.
func (m *MockLLM) LastSystem() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.systems) == 0 {
		return ""
	}
	return m.systems[len(m.systems)-1]
}

// LastResult is the latest tool result opencode sent back.
func (m *MockLLM) LastResult() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.results) == 0 {
		return ""
	}
	return m.results[len(m.results)-1]
}

func (m *MockLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{map[string]any{"id": "mock-1", "object": "model"}}})
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
		Tools  []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &req)
	var tools []string
	for _, t := range req.Tools {
		tools = append(tools, t.Function.Name)
	}
	last := ""
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1].Role
	}
	var call *ToolCall
	m.mu.Lock()
	if len(tools) > 0 {
		m.offered = append(m.offered, tools)
		var sys []string
		for _, msg := range req.Messages {
			if msg.Role == "system" {
				sys = append(sys, contentText(msg.Content))
			}
		}
		m.systems = append(m.systems, strings.Join(sys, "\n"))
	}
	if last == "tool" {
		m.results = append(m.results, contentText(req.Messages[len(req.Messages)-1].Content))
	} else if len(tools) > 0 && last == "user" && len(m.script) > 0 {
		call = &m.script[0]
		m.script = m.script[1:]
	}
	m.mu.Unlock()

	id, created := fmt.Sprintf("chatcmpl-%d", time.Now().UnixNano()), time.Now().Unix()
	text := "Mock title"
	if last == "tool" {
		text = "MOCK DONE."
	}
	var delta map[string]any
	finish := "stop"
	if call != nil {
		args, _ := json.Marshal(call.Args)
		delta = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"index": 0, "id": "call_" + id, "type": "function", "function": map[string]any{"name": call.Name, "arguments": string(args)}}}}
		finish = "tool_calls"
	} else {
		delta = map[string]any{"role": "assistant", "content": text}
	}
	if !req.Stream {
		msg := map[string]any{}
		for k, v := range delta {
			msg[k] = v
		}
		json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}})
	chunk(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}})
	chunk(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	io.WriteString(w, "data: [DONE]\n\n")
}

// contentText flattens a message content (a string or a list of parts).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
