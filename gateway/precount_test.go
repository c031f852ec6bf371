package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A body over the 16 MiB cap, a body that cannot be read and a query
// string /mcp does not take count against the device's read rate before
// they are answered, as a body that does not parse does: before, each was
// answered ahead of the count, so a device flooded the gateway with them
// unthrottled. Each still has its audit line.
func TestARequestRefusedBeforeItsParseCountsAgainstTheRate(t *testing.T) {
	t.Parallel()
	d := devices[0]
	d.ReadRate = 1 // bursts of 100
	g := newGW(t, []Device{d})
	send := func(kind int) *httptest.ResponseRecorder {
		target := g.http.URL + "/mcp"
		if kind == 2 {
			target += "?x=1"
		}
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+g.tokens[d.ID])
		switch kind {
		case 0:
			req.ContentLength = MaxBody + 1 // answered 413 before it is read
		case 1:
			req.Body = errReader{}
		}
		rec := httptest.NewRecorder()
		g.srv.ServeHTTP(rec, req)
		return rec
	}
	limited := 0
	for i := range 150 {
		rec := send(i % 3)
		if strings.Contains(rec.Body.String(), `"rule":"rate:read"`) {
			limited++
		}
	}
	if limited < 40 {
		t.Fatalf("150 refused requests at once, read rate 1/s: %d limited", limited)
	}
	if n := len(g.auditLog()); n < 150 {
		t.Fatalf("%d audit lines for 150 requests", n)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, http.ErrBodyReadAfterClose }
func (errReader) Close() error             { return nil }
