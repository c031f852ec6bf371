package mockmodel

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// API is a model wire protocol, told by the request's path.
type API string

const (
	OpenAIChat      API = "openai-chat"      // POST …/chat/completions
	OpenAIResponses API = "openai-responses" // POST …/responses
	Anthropic       API = "anthropic"        // POST …/messages
	Gemini          API = "gemini"           // POST …/models/<m>:generateContent or :streamGenerateContent
)

// Request is one request the model got. API is empty for the side
// requests (model lists, token counts).
type Request struct {
	API  API
	Path string
	Body []byte
}

// ToolCall is one scripted call the model makes (chat completions only).
type ToolCall struct {
	Name string
	Args map[string]any
}

// Reply is the text the model answers with, except after a tool result,
// when it answers AfterTool.
const (
	Reply     = "hi"
	AfterTool = "MOCK DONE."
)

// Model is the mock endpoint.
type Model struct {
	// URL is the server's root (http://127.0.0.1:port); clients add their
	// own prefix (/v1, /v1beta), which the routing ignores.
	URL    string
	mu     sync.Mutex
	reqs   []Request
	script []ToolCall
}

// Start starts a model on loopback, stopped at the test's cleanup.
func Start(t testing.TB) *Model {
	m := &Model{}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	m.URL = srv.URL
	return m
}

// Next scripts the tool call of the next chat completions request that
// offers tools and ends with a user turn.
func (m *Model) Next(c ToolCall) {
	m.mu.Lock()
	m.script = append(m.script, c)
	m.mu.Unlock()
}

// Reset forgets the requests recorded so far (the script stays).
func (m *Model) Reset() { m.mu.Lock(); m.reqs = nil; m.mu.Unlock() }

// Requests are the requests recorded so far, oldest first.
func (m *Model) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.reqs...)
}

// ModelRequests are the recorded requests to a model API (no side
// requests).
func (m *Model) ModelRequests() []Request {
	var out []Request
	for _, r := range m.Requests() {
		if r.API != "" {
			out = append(out, r)
		}
	}
	return out
}

func apiOf(r *http.Request) API {
	p := r.URL.Path
	switch {
	case r.Method != http.MethodPost:
		return ""
	case strings.HasSuffix(p, "/chat/completions"):
		return OpenAIChat
	case strings.HasSuffix(p, "/responses"):
		return OpenAIResponses
	case strings.HasSuffix(p, "/messages"):
		return Anthropic
	case strings.HasSuffix(p, ":generateContent"), strings.HasSuffix(p, ":streamGenerateContent"):
		return Gemini
	}
	return ""
}

func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	api := apiOf(r)
	m.mu.Lock()
	m.reqs = append(m.reqs, Request{API: api, Path: r.URL.Path, Body: body})
	m.mu.Unlock()
	switch api {
	case OpenAIChat:
		m.chat(w, body)
	case OpenAIResponses:
		responses(w, body)
	case Anthropic:
		anthropic(w, body)
	case Gemini:
		gemini(w, r)
	default:
		side(w, r)
	}
}

// side answers what clients ask besides the model: model lists and token
// counts.
func side(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, "/count_tokens"):
		io.WriteString(w, `{"input_tokens":1}`)
	case strings.HasSuffix(p, ":countTokens"):
		io.WriteString(w, `{"totalTokens":1}`)
	case strings.HasSuffix(p, "/models") && r.Method == http.MethodGet:
		io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model","type":"model","display_name":"m"}],"models":[{"name":"models/m"}]}`)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
