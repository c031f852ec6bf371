package edge

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// A primary that answers 307 to another host or port does not get the
// token sent there: the edge's client (its session, the check `edge
// status` and `edge flush` make) follows no redirect, and says where the
// primary pointed and what to set. Before, the bearer transport put the
// token on the followed request too (attack61 F5).
func TestThePrimarysRedirectIsNotFollowedWithTheToken(t *testing.T) {
	t.Parallel()
	primaryURL, target, carried := testbed.Redirecting(t)

	p := NewPrimary(primaryURL+"/mcp", func() string { return "tok-secret" }, slog.New(slog.DiscardHandler),
		PrimaryOptions{Timeout: 5 * time.Second, Probe: time.Hour, Quiet: true})
	defer p.Close()
	got := p.Check(context.Background())
	if n := carried(); n != 0 {
		t.Errorf("%d requests carried the token to the redirect's target", n)
	}
	want := "the primary answered a redirect (HTTP 307) to " + target + ", on another host, scheme or port: check it is your primary before pointing MEMPALACE_REMOTE_URL at it"
	if !strings.Contains(got, want) || strings.Contains(got, "k=v") {
		t.Errorf("Check = %q, want it to hold %q (the target's query left out)", got, want)
	}
}

// A redirect whose Location Go cannot take (a control character in it)
// fails the request with the header quoted whole: edge status's and edge
// flush's line about the primary then carried the token it held, in
// clear and base64 (attack62 N2). It is redacted and printable.
func TestAMalformedRedirectsTokenIsNotPrinted(t *testing.T) {
	t.Parallel()
	const token = "tok-SECRET-malformed-location"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // ends when the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				bufio.NewReader(c).ReadString('\n') // the request line is enough
				fmt.Fprintf(c, "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://x/\x01%s %s\r\nContent-Length: 0\r\n\r\n", token, base64.StdEncoding.EncodeToString([]byte(token)))
			}()
		}
	}()
	p := NewPrimary("http://"+ln.Addr().String()+"/mcp", func() string { return token }, slog.New(slog.DiscardHandler),
		PrimaryOptions{Timeout: 5 * time.Second, Probe: time.Hour, Quiet: true})
	defer p.Close()
	got := p.Check(context.Background())
	if strings.Contains(got, token) || strings.Contains(got, base64.StdEncoding.EncodeToString([]byte(token))[:20]) || strings.ContainsRune(got, 1) {
		t.Fatalf("Check = %q", got)
	}
}

// The same unreadable answer with a secret that is not this device's
// token (another's, a signed URL's) in the Location: masking the token
// cannot hide it, so the line is not shown at all.
func TestAnUnreadableAnswerIsNotQuoted(t *testing.T) {
	t.Parallel()
	p := NewPrimary(testbed.UnreadableHeader(t), func() string { return "tok-0123456789abcdef" }, slog.New(slog.DiscardHandler),
		PrimaryOptions{Timeout: 5 * time.Second, Probe: time.Hour, Quiet: true})
	defer p.Close()
	got := p.Check(context.Background())
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "malformed header line") {
		t.Fatalf("Check = %q: want the answer said to be unreadable, its line not shown", got)
	}
}
