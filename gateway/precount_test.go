package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A body over the 16 MiB cap, a body that cannot be read and a query
// string /mcp does not take count against the device's read rate before
// they are answered, as a body that does not parse does: before, each was
// answered ahead of the count, so a device flooded the gateway with them
// unthrottled. Each still has its audit line, and so do the first
// refusals by the rate (the rest are counted in one line: refusals.go).
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
	if n, want := len(g.auditLog()), 150-limited+deviceLines; n != want {
		t.Fatalf("%d audit lines for 150 requests, %d of them over the rate: want %d", n, limited, want)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, http.ErrBodyReadAfterClose }
func (errReader) Close() error             { return nil }

// A client that writes its whole request before it reads the answer (as
// Python's http.client does) gets the 413 for a body over the cap, with a
// Content-Length or chunked: before, the gateway answered and closed with
// the body unread, and the client's write failed with a broken pipe or a
// reset, the refusal never read (attack50 A6).
func TestAClientWritingItsWholeBodyReadsThe413(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{devices[0]})
	body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", MaxBody+4<<20) + `"}}`
	for _, chunked := range []bool{false, true} {
		host := strings.TrimPrefix(g.http.URL, "http://")
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		req := "POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + g.tokens[devices[0].ID] + "\r\nContent-Type: application/json\r\n"
		if chunked {
			req += "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
		} else {
			req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
		}
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatalf("chunked %v: the request could not be written whole: %v", chunked, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("chunked %v: no answer: %v", chunked, err)
		}
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(got), "Request too large") {
			t.Fatalf("chunked %v: %d %s", chunked, resp.StatusCode, got)
		}
	}
}
