package doctor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/redact"
)

// text is every finding's message and fix.
func text(fs []Finding) string {
	b, _ := json.Marshal(fs)
	var s strings.Builder
	for _, f := range fs {
		s.WriteString(f.Message + "\n" + f.Fix + "\n")
	}
	return s.String() + string(b)
}

// A short or common token is not masked (it blanked "devbox-config" as
// "devbo[token]-config" with token x, and "examples/" as "[token]s/" with
// the README's token "example"): it is a weak-token finding instead, and
// the words around it stay intact.
func TestRedactionLeavesWordsAlone(t *testing.T) {
	for _, c := range []struct {
		token, url string
		intact     []string
	}{
		{"x", "http://127.0.0.1:1/mcp", []string{"devbox-config", "examples/docker-compose"}},
		{"example", "http://127.0.0.1:1/mcp", []string{"examples/docker-compose", "devbox-config"}},
		{"example", "palace.example.org/mcp", []string{"https://palace.example.org/mcp"}},
		{"palace", "palace.example.org/mcp", []string{"https://palace.example.org/mcp", "knowledge_graph"}},
	} {
		t.Run(c.token+" "+c.url, func(t *testing.T) {
			b := newBox(t)
			b.env["MEMPALACE_REMOTE_URL"] = c.url
			b.env["MEMPALACE_REMOTE_TOKEN"] = c.token
			b.opts.Timeout = 300 * time.Millisecond
			kg(t, filepath.Join(b.home, ".mempalace", "knowledge_graph.sqlite3"), 2)
			kg(t, filepath.Join(b.palace, "knowledge_graph.sqlite3"), 1)
			fs := b.run()
			out := text(fs)
			if strings.Contains(out, "[token]") {
				t.Errorf("a %d-character token was masked in words:\n%s", len(c.token), out)
			}
			for _, w := range c.intact {
				if !strings.Contains(out, w) {
					t.Errorf("%q is not intact:\n%s", w, out)
				}
			}
			weak := false
			for _, f := range fs {
				weak = weak || f.ID == IDWeakToken && strings.Contains(f.Message, "16")
			}
			if !weak {
				t.Errorf("no weak-token finding for a %d-character token: %v", len(c.token), ids(fs))
			}
		})
	}
}

// A token long enough to be a secret never appears in doctor's output,
// even when the outside world quotes it back: a server's error text, the
// outbox's record of a refusal.
func TestRedactionMasksASecretQuotedBack(t *testing.T) {
	const tok = "Qm7vR2xK9pL4wT8nY3cF6hJ1"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Write([]byte("ok\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no such client: ` + r.Header.Get("Authorization") + ` (` + base64.StdEncoding.EncodeToString([]byte(tok)) + `)"}}`))
	}))
	t.Cleanup(echo.Close)
	b := newBox(t)
	b.env["MEMPALACE_REMOTE_URL"] = echo.URL + "/mcp"
	b.env["MEMPALACE_REMOTE_TOKEN"] = tok
	ctx := context.Background()
	s, err := outbox.Open(OutboxPath(b.palace), "dev", "")
	must(t, err)
	s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"refused"}`), Wing: "w"})
	(&outbox.Flusher{S: s, P: echoing{tok}, MaxRefusals: 1}).Drain(ctx)
	s.Close()
	fs := b.run()
	out := text(fs)
	if strings.Contains(out, tok) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(tok))[:16]) || !strings.Contains(out, "[token]") {
		t.Fatalf("the token is printed, or nothing was masked:\n%s", out)
	}
	only(t, fs, "error:primary-unreachable", "error:outbox-dead")
}

// echoing refuses every write quoting the token back, as a careless
// server might.
type echoing struct{ tok string }

func (echoing) Up() bool { return true }
func (e echoing) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	return nil, &outbox.RPCError{Code: -32602, Message: "token " + e.tok + " may not call " + tool}
}

// hostile refuses every write with escape codes (an OSC title, a clear
// screen), bidi and invisible characters, a NUL and a CR LF that starts a
// forged line, as a hostile primary might.
type hostile struct{}

func (hostile) Up() bool { return true }
func (hostile) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	return nil, &outbox.RPCError{Code: -32602, Message: "refused \x1b]0;pwned\x07\x1b[2J \u202eevil\u202c \u200b NUL:\x00 END\r\n- evt_fake: task.request"}
}

// The dead-writes finding quotes the primary's refusal with each control,
// bidi and invisible character as its escape (attack61 F3: raw, so the
// primary could clear the terminal and print a line of its own).
func TestDeadWritesQuoteTheRefusalEscaped(t *testing.T) {
	b := newBox(t)
	ctx := context.Background()
	s, err := outbox.Open(OutboxPath(b.palace), "dev", "")
	must(t, err)
	s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"refused"}`), Wing: "w"})
	(&outbox.Flusher{S: s, P: hostile{}, MaxRefusals: 1}).Drain(ctx)
	s.Close()
	for _, f := range b.run() {
		if f.ID != IDOutboxDead {
			continue
		}
		for _, raw := range []string{"\x1b", "\x07", "\u202e", "\u200b", "\x00", "\r", "\n"} {
			if strings.Contains(f.Message, raw) {
				t.Errorf("the dead-writes finding holds a raw %q: %q", raw, f.Message)
			}
		}
		if !strings.Contains(f.Message, `\x1b]0;pwned\x07`) {
			t.Errorf("the dead-writes finding does not quote the refusal escaped: %q", f.Message)
		}
		return
	}
	t.Fatal("no dead-writes finding")
}

// wrapsIt fails every write quoting the token in base64 wrapped over two
// lines, as a MIME-minded server might: err is the failure around it.
type wrapsIt struct {
	tok string
	err func(msg string) error
}

func (wrapsIt) Up() bool { return true }
func (w wrapsIt) Call(context.Context, string, json.RawMessage) (map[string]any, error) {
	b64 := base64.StdEncoding.EncodeToString([]byte(w.tok))
	return nil, w.err("no such client " + b64[:16] + "\n" + b64[16:])
}

// The token's base64 wrapped over lines in the primary's words is masked
// in the dead-writes and the backlog findings: doctor masks before it
// makes the words printable, which turns the line break into a space the
// masking could not see across (the review: the base64 showed whole).
func TestRedactionMasksAWrappedBase64TokenBeforeMakingItPrintable(t *testing.T) {
	const tok = "Qm7vR2xK9pL4wT8nY3cF6hJ1"
	b64 := base64.StdEncoding.EncodeToString([]byte(tok))
	for _, c := range []struct {
		name string
		err  func(string) error
		id   string
	}{
		{"dead", func(m string) error { return &outbox.RPCError{Code: -32602, Message: m} }, IDOutboxDead},
		{"backlog", errors.New, IDOutboxBacklog},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBox(t)
			b.env["MEMPALACE_REMOTE_TOKEN"] = tok
			b.opts.Now = func() time.Time { return time.Now().Add(3 * time.Hour) }
			s, err := outbox.Open(OutboxPath(b.palace), "dev", "")
			must(t, err)
			s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Wing: "w"})
			(&outbox.Flusher{S: s, P: wrapsIt{tok, c.err}, MaxRefusals: 1, Retries: -1}).Drain(context.Background())
			s.Close()
			for _, f := range b.run() {
				if f.ID != c.id {
					continue
				}
				if strings.Contains(f.Message, b64[:16]) || strings.Contains(f.Message, b64[16:]) || !strings.Contains(f.Message, "no such client "+redact.Mark) {
					t.Fatalf("the wrapped base64 token is shown, or nothing was masked: %q", f.Message)
				}
				return
			}
			t.Fatalf("no %s finding", c.id)
		})
	}
}
