package realpalace

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// Proxy stands in front of an HTTP endpoint (serve, a gateway) on
// 127.0.0.1: it passes every request on as it came and counts the
// tools/call requests by tool. A tool named in Drop loses its next
// answer: the request is passed on, the answer awaited (the write is
// applied), and the client's connection closed without it.
type Proxy struct {
	// URL is the proxy's /mcp endpoint; Base without the path.
	URL, Base string
	to        string // the target's base URL
	srv       *httptest.Server

	mu    sync.Mutex
	drop  map[string]int
	calls map[string]int
	lost  []string
}

// NewProxy starts a proxy in front of target (an /mcp URL or a base URL),
// closed at t's cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	p := &Proxy{to: strings.TrimSuffix(target, "/mcp"), drop: map[string]int{}, calls: map[string]int{}}
	p.srv = httptest.NewServer(p)
	p.Base, p.URL = p.srv.URL, p.srv.URL+"/mcp"
	t.Cleanup(p.srv.Close)
	return p
}

// Drop makes the next call of each tool (its full name) lose its answer
// after the target has made it.
func (p *Proxy) Drop(tools ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range tools {
		p.drop[t]++
	}
}

// Calls is how many tools/call requests for tool (its full name) the
// proxy passed on and the target answered or failed.
func (p *Proxy) Calls(tool string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[tool]
}

// Tools is every tool called through the proxy, with its count.
func (p *Proxy) Tools() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls)
}

// Lost lists the tools whose answers were lost, in order.
func (p *Proxy) Lost() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lost...)
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tool := ""
	if gjson.GetBytes(body, "method").Str == "tools/call" {
		tool = gjson.GetBytes(body, "params.name").Str
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.to+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	answer, resp, err := p.pass(req)
	// counted once the target has answered (or failed): a test that waits
	// for a count then reads the target finds the call made
	p.mu.Lock()
	if tool != "" {
		p.calls[tool]++
	}
	p.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	p.mu.Lock()
	lose := tool != "" && p.drop[tool] > 0
	if lose {
		p.drop[tool]--
		p.lost = append(p.lost, tool)
	}
	p.mu.Unlock()
	if lose {
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.Close() // the answer is lost with the connection
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer) // the client went away: nothing else to tell it
}

// pass sends req to the target and reads its whole answer.
func (p *Proxy) pass(req *http.Request) ([]byte, *http.Response, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	return answer, resp, err
}
