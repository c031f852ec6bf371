package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/jsondepth"
	"github.com/joakimp/devbox-config/testbed"
)

// TestDeeplyNestedAnswerIsRefusedNotFatal: a search answer whose hit (or
// whose envelope, a delete's answer, a write's answer) nests arrays a million deep (a
// 2 MB answer, 1/32 of maxAnswer) must be refused, not read by
// recursion. It runs in a child process whose stack is capped at 1/32 of
// Go's default (1 GB), so a crash there means an answer within maxAnswer
// crashes the gateway itself (a fatal stack overflow, which
// no recover catches: every device's calls die with it).
func TestDeeplyNestedAnswerIsRefusedNotFatal(t *testing.T) {
	t.Parallel()
	testbed.InSmallStack(t, 1<<30/32, func(t *testing.T) {
		const depth = 1 << 20
		s := &Server{}
		search, _ := catalogue.Lookup("mempalace_search")
		deep := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		text := `{"results":[{"wing":"shared","x":` + deep + `}]}`
		for _, env := range [][]byte{
			encodeJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}}),
			[]byte(`{"jsonrpc": "2.0", "id": 1, "error": ` + deep + `}`), // the envelope, read by the general decoder
		} {
			if _, err := s.filterAnswer(context.Background(), &devices[0], search, Decision{Allow: true}, []byte("1"), env); err == nil {
				t.Fatalf("an answer nested a million deep was passed: %.80s", env)
			}
		}
		if st, _, _, _ := (&kept{}).outcome(http.StatusOK, []byte(`{"error": `+deep+`}`)); st != trash.StateUnconfirmed {
			t.Fatalf("a delete's answer nested a million deep: %q", st)
		}
		// a write's answer, read by the op-id ledger before the filter
		if _, ok := ledger.Recordable(ledger.Answer{Status: http.StatusOK, Body: []byte(`{"jsonrpc": "2.0", "id": 1, "result": ` + deep + `}`)}); ok {
			t.Fatal("the ledger recorded a write's answer nested a million deep")
		}
	})
}

// TestDeclaredLengthIsNotAllocatedUpFront: an upstream answer that declares a
// Content-Length of maxAnswer and sends a few bytes must not cost the
// gateway maxAnswer of memory up front per call (a buffer sized from
// the header, not from what arrives: a few dozen such calls at once and
// the gateway runs out of memory). Not parallel: what it measures is the
// process's allocations, and the parallel tests beside it (a 4 MiB request
// among them) allocate more than its bound.
func TestDeclaredLengthIsNotAllocatedUpFront(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(maxAnswer))
		w.Write([]byte(`{"jsonrpc":"2.0"`))
	}))
	defer up.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	postMCP(context.Background(), up.Client(), up.URL, "", []byte(`{}`))
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > maxAnswer/4 {
		t.Fatalf("a %d-byte answer declaring %d bytes cost %d bytes", 16, maxAnswer, n)
	}
}

// An answer wide rather than deep, with more brackets than the nesting
// bound (so jsondepth reads it through), is filtered as any other.
func TestWideAnswerIsNotTooDeep(t *testing.T) {
	t.Parallel()
	s := &Server{}
	search, _ := catalogue.Lookup("mempalace_search")
	hits := strings.Repeat(`{"wing":"private_desk","text":"[{"},`, 2*jsondepth.Max) + `{"wing":"shared","text":"kept"}`
	env := encodeJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": `{"results":[` + hits + `]}`}}}})
	out, err := s.filterAnswer(context.Background(), &devices[0], search, Decision{Allow: true}, []byte("1"), env)
	if err != nil || strings.Count(string(out), "wing") != 1 || !strings.Contains(string(out), "kept") {
		t.Fatalf("a wide answer: %v %.300s", err, out)
	}
}

// TestFilteredAnswerCarriesTheRequestsID: an upstream that answers a
// tools/call under another id (another number, an object, a string that
// is not UTF-8) or another jsonrpc: the answer the filter rebuilds goes
// to the device under the id the device sent and "2.0", what its client
// matches on, never the upstream's.
func TestFilteredAnswerCarriesTheRequestsID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ jsonrpc, id string }{
		{`"2.0"`, `99`},
		{`"2.0"`, `{"leak": "another wing's words"}`},
		{`"2.0"`, "\"\xff\""},
		{`"1.0"`, `7`},
	} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc": `+c.jsonrpc+`, "id": `+c.id+`, "result": {"content": [{"type": "text", "text": "{\"results\": []}"}]}}`)
		}))
		g := newGWAt(t, devices, &upstream{name: "wrong id", url: up.URL + "/mcp"})
		for _, id := range []string{`7`, `"req-7"`} {
			req, _ := http.NewRequest("POST", g.http.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"q","wing":"shared"}}}`))
			req.Header.Set("Authorization", "Bearer "+g.tokens["laptop-7f3a"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := gjson.GetBytes(body, "id").Raw; got != id || gjson.GetBytes(body, "jsonrpc").Raw != `"2.0"` || !utf8.Valid(body) || !gjson.GetBytes(body, "result").Exists() {
				t.Errorf("the upstream answered jsonrpc %s id %q to id %s: the device got %q", c.jsonrpc, c.id, id, body)
			}
		}
		up.Close()
	}
}

// TestAnswerOverTheCapIsRefused: an upstream answer longer than maxAnswer
// is no answer (502, "maybe applied" for a write), never its first
// maxAnswer bytes passed on as if they were all of it.
func TestAnswerOverTheCapIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 64 MiB")
	}
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte(" "), maxAnswer))
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	defer up.Close()
	status, body := postMCP(context.Background(), up.Client(), up.URL, "", []byte(`{}`))
	if status != http.StatusBadGateway || !strings.Contains(string(body), "over") {
		t.Fatalf("an answer of %d bytes: %d %.200q", maxAnswer+36, status, body)
	}
}
