package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/redact"
)

// A5 (attack50): an upstream error answer (an isError result, a JSON-RPC
// error) to a device that is not admin has the primary's URLs and
// absolute paths cut, each with a mark saying so, and keeps the rest; an
// admin device gets it whole (before: every device got MemPalace's
// "Embedding API request to http://127.0.0.1:19501/v1/embeddings failed",
// the embedder's URL operator.md says only admins see).
func TestAnErrorToADeviceNotAdminHidesThePrimarysTopology(t *testing.T) {
	t.Parallel()
	const where, path = "http://127.0.0.1:19501/v1/embeddings", "/srv/palace/chroma.sqlite3"
	for _, c := range []struct{ name, body, says string }{
		{"tool error", func() string {
			text, _ := json.Marshal(`{"error": "Embedding API unavailable", "details": "Embedding API request to ` + where + ` failed: <urlopen error [Errno 111] Connection refused>", "palace": "` + path + `"}`)
			return `{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":` + string(text) + `}]}}`
		}(), `Embedding API request to ` + redact.URLMark + ` failed: \u003curlopen error [Errno 111] Connection refused\u003e`},
		{"rpc error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"cannot reach ` + where + ` for ` + path + `","data":{"url":"` + where + `"}}}`,
			`"message":"cannot reach ` + redact.URLMark + ` for ` + redact.PathMark + `"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGWAt(t, devices, &upstream{name: "echo", url: echoing(t, func(string) string { return c.body })})
			call := func(device string) string {
				req, _ := http.NewRequest("POST", g.http.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"x"}}}`))
				req.Header.Set("Authorization", "Bearer "+g.tokens[device])
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return string(b)
			}
			if got := call("desk-9b21"); strings.Contains(got, "19501") || strings.Contains(got, "/srv/palace") || !strings.Contains(got, c.says) {
				t.Errorf("desk (not admin) got %s\nwant it to say %s, without the URL or the path", got, c.says)
			}
			if got := call("admin-0001"); !strings.Contains(got, where) || !strings.Contains(got, path) {
				t.Errorf("the admin device got %s, want the URL and the path", got)
			}
		})
	}
}
