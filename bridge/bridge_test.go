package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

func primary(t *testing.T, token string) string {
	t.Helper()
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: token})
	return srv.URL()
}

// serve runs a bridge on pipes and returns a client session on them.
func serve(t *testing.T, cfg Config) (*mcp.ClientSession, chan error) {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hr, bw := io.Pipe() // bridge -> harness
	br, hw := io.Pipe() // harness -> bridge
	done := make(chan error, 1)
	go func() { done <- b.Serve(context.Background(), br, bw) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "harness"}, nil).Connect(ctx, &mcp.IOTransport{Reader: hr, Writer: hw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); hw.Close(); <-done })
	return cs, done
}

// A harness on the bridge sees the primary's tools and its calls reach the
// primary with the token from the environment.
func TestBridgeForwardsToolsWithTheToken(t *testing.T) {
	url := primary(t, "tok-bridge-SECRET")
	cs, _ := serve(t, Config{URL: url, Token: func() string { return "tok-bridge-SECRET" }})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if len(names) < 10 || !strings.Contains(strings.Join(names, " "), "mempalace_status") {
		t.Fatalf("the bridge offers %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_add_drawer", Arguments: map[string]any{"wing": "w", "room": "r", "content": "bridged drawer"}})
	if err != nil || res.IsError {
		t.Fatalf("add_drawer through the bridge: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_search", Arguments: map[string]any{"query": "bridged drawer"}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "bridged drawer") {
		t.Fatalf("search through the bridge does not find the drawer: %v %s", err, textOf(res))
	}
}

// A wrong token is the primary's 401, and a token with a line break or
// another control character is no header at all: either is reported at
// start, naming MEMPALACE_REMOTE_TOKEN and the fix without repeating the
// token, not a bridge that offers no tools (nor a bare "Unauthorized" or
// Go's "invalid header field value").
func TestBridgeRefusedTokenFailsAtStart(t *testing.T) {
	url := primary(t, "tok-RIGHT-bridge")
	for token, says := range map[string]string{
		"tok-WRONG-bridge":   "refused",
		"tok-RIGHT-bridge\n": "control character",
		"tok-RIGHT-bridge\r": "control character",
		"\x01tok-RIGHT":      "control character",
	} {
		b, err := New(Config{URL: url, Token: func() string { return token }, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		r, w := io.Pipe()
		err = b.Serve(context.Background(), r, nopCloser{io.Discard})
		w.Close()
		if err == nil || !strings.Contains(err.Error(), "MEMPALACE_REMOTE_TOKEN") || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "fix:") || strings.Contains(err.Error(), "tok-") {
			t.Errorf("Serve with the token %q: %v; want it to name MEMPALACE_REMOTE_TOKEN, say %q and a fix, without the token", token, err, says)
		}
	}
}

func TestBridgeNeedsURLAndToken(t *testing.T) {
	if _, err := New(Config{Token: func() string { return "t" }}); err == nil || !strings.Contains(err.Error(), "MEMPALACE_REMOTE_URL") {
		t.Fatalf("no URL: %v", err)
	}
	if _, err := New(Config{URL: "http://127.0.0.1:9/mcp", Token: func() string { return "" }}); err == nil || !strings.Contains(err.Error(), "MEMPALACE_REMOTE_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func textOf(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// echoing is a primary whose tools answer with the token in every place an
// answer can hold it (each tool's name says where), and a bridge to it.
func echoing(t *testing.T, tok string) *mcp.ClientSession {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echoing"}, nil)
	schema := &jsonschema.Schema{Type: "object"}
	add := func(name string, res *mcp.CallToolResult, err error) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return res, err
		})
	}
	failed := func(c ...mcp.Content) *mcp.CallToolResult {
		return &mcp.CallToolResult{IsError: true, Content: append([]mcp.Content{&mcp.TextContent{Text: "failed"}}, c...)}
	}
	add("rpc_error", nil, &jsonrpc.Error{Code: -32603, Message: "internal: auth=Bearer " + tok, Data: json.RawMessage(`{"auth":"` + tok + `"}`)})
	add("rpc_error_data_key", nil, &jsonrpc.Error{Code: -32603, Message: "internal", Data: json.RawMessage(`{"` + tok + `":1}`)})
	add("tool_error", failed(&mcp.TextContent{Text: "denied for token " + tok}), nil)
	structured := failed()
	structured.StructuredContent = map[string]any{"auth": "Bearer " + tok, "tok": tok, "nested": []any{map[string]any{"t": tok}}}
	add("tool_error_structured", structured, nil)
	keyed := failed()
	keyed.StructuredContent = map[string]any{tok: 1}
	add("tool_error_structured_key", keyed, nil)
	add("tool_error_resource", failed(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "data:," + tok, Text: "t=" + tok}}), nil)
	add("tool_error_image", failed(&mcp.ImageContent{Data: []byte(tok), MIMEType: "image/png"}), nil)
	add("tool_error_link", failed(&mcp.ResourceLink{URI: "https://h/?t=" + tok, Name: tok}), nil)
	add("ok", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a drawer may hold " + tok}}, StructuredContent: map[string]any{tok: tok}}, nil)
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(h.Close)
	cs, _ := serve(t, Config{URL: h.URL, Token: func() string { return tok }})
	return cs
}

// noToken fails the test for each named tool of echoing whose answer
// reaches the harness with tok in it (raw or base64) or without [redacted].
func noToken(t *testing.T, cs *mcp.ClientSession, tok string, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b64 := base64.StdEncoding.EncodeToString([]byte(tok))
	for _, name := range names {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		seen := fmt.Sprint(err)
		if rpc := (*jsonrpc.Error)(nil); errors.As(err, &rpc) {
			seen += string(rpc.Data)
		}
		if res != nil {
			j, _ := json.Marshal(res)
			seen += string(j)
		}
		if strings.Contains(seen, tok) || strings.Contains(seen, b64[:len(b64)-4]) || !strings.Contains(seen, "[redacted]") {
			t.Errorf("%s reaches the harness as %s", name, seen)
		}
	}
}

// A primary (or a proxy in front of it) whose error repeats the token, as a
// JSON-RPC error or anywhere in a tool's error result (text, structured
// content, a resource's uri and text, a link, an image's data), does not
// hand it to the harness and so to the model: the bridge quotes such
// errors with the token as [redacted] (as the edge does), and passes every
// other answer unchanged.
func TestBridgeDoesNotPassOnAnEchoedToken(t *testing.T) {
	const tok = "Ab+cd/ef=gh_bridge-SECRET-42"
	cs := echoing(t, tok)
	noToken(t, cs, tok, "rpc_error", "tool_error", "tool_error_structured", "tool_error_resource", "tool_error_image", "tool_error_link")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ok", Arguments: map[string]any{}})
	if got, _ := json.Marshal(res); err != nil || textOf(res) != "a drawer may hold "+tok || !strings.Contains(string(got), `"structuredContent":{"`+tok+`":"`+tok+`"}`) {
		t.Errorf("a successful answer was changed: %v %s", err, got)
	}
}

// The token as a key (of a JSON-RPC error's data, of an error result's
// structured content) is taken out too: it needs redact.JSON to redact
// keys.
func TestBridgeDoesNotPassOnTheTokenAsAKey(t *testing.T) {
	const tok = "Ab+cd/ef=gh_bridge-SECRET-42"
	noToken(t, echoing(t, tok), tok, "rpc_error_data_key", "tool_error_structured_key")
}
