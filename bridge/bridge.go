package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/redact"
)

// Config is what the bridge needs: the primary and the token, both from
// the environment (the ladder reads them).
type Config struct {
	URL string
	// Token is called for every request, so a rotated token is used at
	// once; it is never logged.
	Token   func() string
	Version string
	// Timeout bounds the connection to the primary and each call
	// (default 30 s).
	Timeout time.Duration
	Log     *slog.Logger
}

// Bridge is one stdio session forwarded to the primary.
type Bridge struct {
	cfg     Config
	primary *mcp.ClientSession
}

// New checks the configuration.
func New(cfg Config) (*Bridge, error) {
	if cfg.URL == "" {
		return nil, errors.New("MEMPALACE_REMOTE_URL is not set: the bridge has no primary to forward to")
	}
	if cfg.Token == nil || cfg.Token() == "" {
		return nil, errors.New("MEMPALACE_REMOTE_TOKEN is not set: the primary would refuse every call")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Bridge{cfg: cfg}, nil
}

// Serve connects to the primary, offers its tools on in/out and forwards
// every call until the harness closes its input or ctx ends.
func (b *Bridge) Serve(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	tools, err := b.connect(ctx)
	if err != nil {
		return err
	}
	defer b.primary.Close()
	server := mcp.NewServer(&mcp.Implementation{Name: "devbox-config-bridge", Version: b.cfg.Version}, nil)
	for _, t := range tools {
		server.AddTool(t, b.forward)
	}
	b.cfg.Log.Info("bridging to the primary", "url", b.cfg.URL, "tools", len(tools))
	err = server.Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// connect opens the session with the primary and lists its tools.
func (b *Bridge) connect(ctx context.Context) ([]*mcp.Tool, error) {
	cctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "devbox-config-bridge", Version: b.cfg.Version}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   b.cfg.URL,
		HTTPClient: &http.Client{Transport: bearer{token: b.cfg.Token, next: ladder.RefuseRedirects(http.DefaultTransport)}},
	}
	cs, err := client.Connect(cctx, transport, nil)
	if te := (*tokenError)(nil); errors.As(err, &te) {
		err = te // the SDK's and net/http's wrapping add nothing
	}
	if err != nil {
		return nil, fmt.Errorf("connect to the primary at %s: %w", b.cfg.URL, err)
	}
	var tools []*mcp.Tool
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			cs.Close()
			return nil, fmt.Errorf("list the primary's tools: %w", err)
		}
		tools = append(tools, t)
	}
	b.primary = cs
	return tools, nil
}

// forward is every tool's handler: the call as the harness made it, to
// the primary, and its result (or error) back. An error, the primary's or
// a tool's (all of it: message, data and its keys, every content item,
// structured content), is quoted with the token as [redacted]: a primary
// or a proxy repeating the Authorization header must not hand it to the
// model. A successful result passes as it came.
func (b *Bridge) forward(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	res, err := b.primary.CallTool(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments})
	tok := b.cfg.Token()
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return nil, &jsonrpc.Error{Code: rpc.Code, Message: redact.Secret(rpc.Message, tok), Data: redact.JSON(rpc.Data, tok)}
		}
		return nil, errors.New(redact.Secret(err.Error(), tok))
	}
	if res.IsError {
		return redactResult(res, tok), nil
	}
	return res, nil
}

// redactResult is a tool's error result with the token taken out wherever
// it is: every content item (text, a resource's uri and text, an image's
// data), the structured content, keys included. A result that no longer
// decodes (an image whose data was the token) is its JSON, redacted, as
// text.
func redactResult(res *mcp.CallToolResult, tok string) *mcp.CallToolResult {
	raw, err := json.Marshal(res)
	if err != nil { // cannot happen: res was decoded from JSON
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the primary's error result could not be quoted: " + redact.Secret(err.Error(), tok)}}}
	}
	red := redact.JSON(raw, tok)
	var out mcp.CallToolResult
	if json.Unmarshal(red, &out) != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(red)}}}
	}
	return &out
}

// bearer adds the token to every request to the primary. A token that
// is no header value, and the primary's 401, are a tokenError naming
// MEMPALACE_REMOTE_TOKEN and its fix, never the token.
type bearer struct {
	token func() string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	tok := b.token()
	if i := strings.IndexFunc(tok, unicode.IsControl); i >= 0 {
		return nil, &tokenError{fmt.Sprintf("MEMPALACE_REMOTE_TOKEN holds a control character (%U, at byte %d of %d), as a token pasted with its line end or a .env saved with Windows line ends has (fix: set it to the token alone, on one line)", []rune(tok[i:])[0], i+1, len(tok))}
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.next.RoundTrip(r) // next refuses a redirect: followed, the token would go where it points
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		resp.Body.Close() // the status is the answer
		return nil, &tokenError{"the primary refused MEMPALACE_REMOTE_TOKEN (HTTP 401) (fix: set it to the primary's token, without \"Bearer \"; behind a devbox-config gateway, this device's own from `devbox-config gateway token issue DEVICE`)"}
	}
	return resp, nil
}

// tokenError is what is wrong with MEMPALACE_REMOTE_TOKEN.
type tokenError struct{ msg string }

func (e *tokenError) Error() string { return e.msg }
