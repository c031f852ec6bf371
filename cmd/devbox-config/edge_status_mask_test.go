package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/redact"
)

// echoesToken is a primary whose refusal repeats the token, raw and as
// base64 wrapped over two lines, as a send through a client that does not
// mask (an older edge's, a join's) leaves it in the outbox.
type echoesToken struct{ tok string }

func (echoesToken) Up() bool { return true }
func (e echoesToken) Call(context.Context, string, json.RawMessage) (map[string]any, error) {
	b64 := base64.StdEncoding.EncodeToString([]byte(e.tok))
	return nil, errors.New("bad credential " + e.tok + "; no such client " + b64[:16] + "\n" + b64[16:])
}

// `edge status`'s last error masks MEMPALACE_REMOTE_TOKEN before it is
// made printable, as doctor's findings do (before, the outbox's last
// error was shown as stored, the token in it, in text and --json; the
// wrapped base64 made one line with a space).
func TestEdgeStatusLastErrorMasksTheToken(t *testing.T) {
	const tok = "Qm7vR2xK9pL4wT8nY3cF6hJ1"
	b64 := base64.StdEncoding.EncodeToString([]byte(tok))
	palace := filepath.Join(t.TempDir(), "palace")
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", "http://127.0.0.1:1/mcp") // refused at once
	t.Setenv("MEMPALACE_REMOTE_TOKEN", tok)
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Wing: "w"}); err != nil {
		t.Fatal(err)
	}
	(&outbox.Flusher{S: s, P: echoesToken{tok}, MaxRefusals: 1, Retries: -1}).Drain(context.Background()) // its refusal is the point
	s.Close()
	_, status, _ := runCLI("edge", "status")
	if !strings.Contains(status, "last error") || !strings.Contains(status, "bad credential "+redact.Mark) {
		t.Fatalf("no last error, or nothing in it masked:\n%s", status)
	}
	_, asJSON, _ := runCLI("edge", "status", "--json")
	for _, out := range []string{status, asJSON} {
		if strings.Contains(out, tok) || strings.Contains(out, b64[:16]) || strings.Contains(out, b64[16:]) {
			t.Errorf("edge status shows the token:\n%s", out)
		}
	}
}
