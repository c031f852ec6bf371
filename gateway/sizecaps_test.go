package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// sizeRecorder stands between the gateway and a fake primary and keeps
// the size of every tools/call it passes on, by tool.
type sizeRecorder struct {
	mu   sync.Mutex
	sent map[string][]int
}

func recordSizes(t *testing.T) (*upstream, *sizeRecorder) {
	t.Helper()
	u := startFake(t)
	target, _ := url.Parse(strings.TrimSuffix(u.url, "/mcp"))
	proxy := httputil.NewSingleHostReverseProxy(target)
	rec := &sizeRecorder{sent: map[string][]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if name := gjson.GetBytes(b, "params.name").String(); name != "" {
			rec.mu.Lock()
			rec.sent[name] = append(rec.sent[name], len(b))
			rec.mu.Unlock()
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		r.Host = target.Host
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &upstream{name: "recorded fakepalace", url: srv.URL + "/mcp", palace: u.palace}, rec
}

func (r *sizeRecorder) of(tool string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent["mempalace_"+tool]
}

// A write whose text is over MemPalace's own cap on it is refused by the
// gateway in MemPalace's words and never sent to the single-writer
// primary (attack100 F4: 16 MiB event bodies were parsed, re-encoded and
// forwarded, to be refused there); at the cap it is sent.
func TestATextOverMemPalacesCapIsNotForwarded(t *testing.T) {
	t.Parallel()
	u, rec := recordSizes(t)
	g := newGWAt(t, devices, u)
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	event := func(body string) map[string]any {
		return map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "opencode@laptop", "body": body}
	}
	for _, c := range []struct {
		name, token, tool string
		args              map[string]any
		says              string // "": sent
	}{
		{"an event body at 256 KiB", laptop, "event_append", event(strings.Repeat("é", 128<<10)), ""},
		{"an event body a byte over", laptop, "event_append", event(strings.Repeat("é", 128<<10) + "a"), "body is 262145 bytes; maximum is 262144 bytes (MemPalace's event body cap): not forwarded"},
		{"a 16 MiB event body", laptop, "event_append", event(strings.Repeat("y", 16<<20-400)), "body is 16776816 bytes; maximum is 262144 bytes"},
		{"a drawer of 100,001 characters", desk, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": strings.Repeat("😀", 100001)}, "content exceeds maximum length of 100000 characters (MemPalace's drawer content cap)"},
		// attack102 F4: MemPalace's alias of entry, and a checkpoint's texts
		{"a diary entry of 8 MB as content", desk, "diary_write", map[string]any{"agent_name": "pi", "content": strings.Repeat("d", 8e6)}, "content exceeds maximum length of 100000 characters (MemPalace's drawer content cap): not forwarded"},
		{"a diary entry of 100,000 characters as content", desk, "diary_write", map[string]any{"agent_name": "pi", "content": strings.Repeat("😀", 100000)}, ""},
		{"a checkpoint item of 100,001 characters", desk, "checkpoint", map[string]any{"items": []any{map[string]any{"wing": "shared", "room": "r", "content": "short"}, map[string]any{"wing": "shared", "room": "r", "content": strings.Repeat("c", 100001)}}}, "items[1]: content exceeds maximum length of 100000 characters (MemPalace's drawer content cap): not forwarded"},
		{"a checkpoint's diary entry of 100,001 characters", desk, "checkpoint", map[string]any{"items": []any{}, "diary": map[string]any{"agent_name": "pi", "content": strings.Repeat("c", 100001)}}, "diary: content exceeds maximum length of 100000 characters"},
		{"a checkpoint at the cap", desk, "checkpoint", map[string]any{"items": []any{map[string]any{"wing": "shared", "room": "r", "content": strings.Repeat("😀", 100000)}}, "diary": map[string]any{"agent_name": "pi", "entry": strings.Repeat("😀", 100000)}}, ""},
	} {
		before := len(rec.of(c.tool))
		_, rpcErr, _ := g.call(c.token, c.tool, c.args)
		msg, _ := rpcErr["message"].(string)
		sent := len(rec.of(c.tool)) > before
		if c.says == "" && (rpcErr != nil || !sent) || c.says != "" && (!strings.Contains(msg, c.says) || rpcErr["code"] != float64(-32602) || sent) {
			t.Errorf("%s: error %v, sent to the primary %v; want %q", c.name, rpcErr, sent, c.says)
		}
	}
}

// A body within the gateway's 16 MiB cap whose message to the primary,
// as the gateway encodes it, would be over mempalace serve's is answered
// 413, -32600 "Request too large", under its id, rule size, and not sent
// (attack100 F5: serve answered 413, surfaced as -32000 "not a JSON-RPC
// answer"). U+2028 goes out as \u2028: 3 bytes become 6.
func TestAMessageOverTheUpstreamsCapIsNotSent(t *testing.T) {
	t.Parallel()
	u, rec := recordSizes(t)
	g := newGWAt(t, devices, u)
	args := map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "opencode@laptop", "body": "b", "metadata": map[string]any{"k": strings.Repeat("\u2028", 3<<20)}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{"name": "mempalace_event_append", "arguments": args}})
	body = bytes.ReplaceAll(body, []byte(`\u2028`), []byte("\u2028")) // as a client that sends the character itself
	if len(body) > MaxBody {
		t.Fatalf("the body is %d bytes, over the cap: the test is wrong", len(body))
	}
	status, m := g.post(g.tokens["laptop-7f3a"], string(body))
	e, _ := m["error"].(map[string]any)
	if msg, _ := e["message"].(string); status != http.StatusRequestEntityTooLarge || e["code"] != float64(-32600) || !strings.HasPrefix(msg, "Request too large: ") || m["id"] != float64(7) {
		t.Errorf("answer: %d %v; want 413, -32600 Request too large, id 7", status, m)
	}
	if sent := rec.of("event_append"); len(sent) > 0 {
		t.Errorf("sent to the primary: %v bytes", sent)
	}
	if l := g.auditLog(); l[len(l)-1].Rule != ruleSize {
		t.Errorf("its line: %+v, want rule size", l[len(l)-1])
	}
}

// An upstream answer over 64 MiB is refused: for a read it says nothing
// was applied and to ask for less, for a write that it may have been
// applied (the op-id ledger's words). Before, a get_drawers was told it
// may have been applied (attack100 F7).
func TestAnAnswerOverTheCapSaysWhatItLeaves(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, io.LimitReader(zeros{}, maxAnswer+1))
	}))
	t.Cleanup(up.Close)
	for _, c := range []struct{ tool, says string }{
		{"mempalace_get_drawers", "upstream answer over 64 MiB: refused; a read applies nothing: ask for less (fewer ids, a smaller limit)"},
		{"mempalace_add_drawer", "upstream answer over 64 MiB: refused; the upstream may have applied it"},
	} {
		status, answer := postMCP(context.Background(), up.Client(), up.URL+"/mcp", "", []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"`+c.tool+`","arguments":{}}}`))
		if msg := gjson.GetBytes(answer, "error.message").String(); status != http.StatusBadGateway || msg != c.says {
			t.Errorf("%s: %d %q, want 502 %q", c.tool, status, msg, c.says)
		}
	}
}

// zeros reads as an endless run of '0's.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = '0'
	}
	return len(b), nil
}
