package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRealStreamResumesAndSaysWhy: through the gateway in front of real
// MemPalace serve, a stream reconnected with the standard Last-Event-ID
// header gets the events it missed, filtered for its device (one from an
// untrusted sender withheld), as since_event_id gets them (attack111 F1:
// the header was dropped, and the stream tailed live only); an unknown
// cursor is refused with the primary's own reason (F5: it was "the
// upstream answered HTTP 400" alone); and a to_agent padded with spaces
// streams as MemPalace's event_list reads it, stripped (F7: a 403).
func TestRealStreamResumesAndSaysWhy(t *testing.T) {
	u, _ := startReal(t)
	fast := func(d Device) Device { d.ReadRate, d.WriteRate = 1e9, 1e9; return d }
	g := newGWAt(t, []Device{
		fast(Device{ID: "alice", Label: "alice", Read: []string{"shared"}, Agents: []string{"pi@alice"}}),
		fast(Device{ID: "mallory", Label: "mallory", Read: []string{"shared"}, Agents: []string{"pi@mallory"}}),
		fast(Device{ID: "dave", Label: "dave", Read: []string{"shared"}, Agents: []string{"pi@dave"}, Trusts: []string{"alice"}, Untrusted: UntrustedWithhold, MaxStreams: 6}), // the streams below stay open
	}, u)
	ask := func(from, body string) string {
		t.Helper()
		res, rpc, _ := g.call(g.tokens[from], "event_append", map[string]any{"type": "ask", "stream": "ops", "room": "desk", "from_agent": "pi@" + from, "to_agent": "pi@dave", "body": body})
		if rpc != nil || res["event"] == nil {
			t.Fatalf("event_append: %v %v", res, rpc)
		}
		return res["event"].(map[string]any)["id"].(string)
	}
	anchor := ask("alice", "seen before the drop")
	ask("mallory", "EVIL while dave was away")
	ask("alice", "good while dave was away")
	stream := func(query string, header ...string) (int, string, *bufio.Scanner) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", g.http.URL+"/logstream/stream?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+g.tokens["dave"])
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), nil
		}
		return 200, "", bufio.NewScanner(resp.Body)
	}
	// bodies reads the stream's events up to the marker, appended now.
	bodies := func(lines *bufio.Scanner, marker string) []string {
		t.Helper()
		ask("alice", marker)
		var got []string
		for lines.Scan() {
			if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				got = append(got, data)
				if strings.Contains(data, marker) {
					return got
				}
			}
		}
		t.Fatalf("the stream ended before %q: %v (got %d events)", marker, lines.Err(), len(got))
		return nil
	}
	missed := func(what string, got []string) {
		t.Helper()
		if len(got) < 2 || !strings.Contains(got[0], "good while dave was away") || strings.Contains(strings.Join(got, "\n"), "EVIL") {
			t.Errorf("%s: want alice's missed ask first, mallory's withheld, got:\n%s", what, strings.Join(got, "\n"))
		}
	}

	code, body, lines := stream("to_agent=pi@dave", "Last-Event-ID", anchor)
	if lines == nil {
		t.Fatalf("a reconnect with Last-Event-ID: %d %s", code, body)
	}
	missed("Last-Event-ID", bodies(lines, "marker one"))
	code, body, lines = stream("to_agent=pi@dave&since_event_id=" + url.QueryEscape(anchor))
	if lines == nil {
		t.Fatalf("since_event_id: %d %s", code, body)
	}
	missed("since_event_id", bodies(lines, "marker two"))

	for _, c := range []struct{ query, header string }{{"to_agent=pi@dave&since_event_id=evt_bad", ""}, {"to_agent=pi@dave", "evt_bad"}} {
		code, body, _ := stream(c.query, "Last-Event-ID", c.header)
		if code != http.StatusBadRequest || !strings.Contains(body, "since_event_id 'evt_bad' not found") {
			t.Errorf("an unknown cursor (%q, Last-Event-ID %q): %d %s", c.query, c.header, code, body)
		}
	}
	if code, body, _ := stream("to_agent=pi@dave", "Last-Event-ID", anchor, "Last-Event-ID", anchor); code != http.StatusBadRequest || !strings.Contains(body, "Last-Event-ID given 2 times") {
		t.Errorf("a repeated Last-Event-ID: %d %s", code, body)
	}

	code, body, lines = stream("to_agent=" + url.QueryEscape(" pi@dave ") + "&since_event_id=" + url.QueryEscape(anchor))
	if lines == nil {
		t.Fatalf("a padded to_agent: %d %s", code, body)
	}
	missed("a padded to_agent", bodies(lines, "marker three"))
	if code, body, _ := stream("to_agent=pi@alice"); code != http.StatusForbidden || !strings.Contains(body, `"pi@dave"`) {
		t.Errorf("another agent's stream: %d %s (want 403 naming dave's agent)", code, body)
	}
}

// TestRealStreamShareHoldsAtThePrimary: against real MemPalace serve,
// whose 8 stream slots six other clients hold, a device that opens and
// closes its streams one at a time is refused 429 once its ended streams
// fill its share of 2 (attack111 F2: it held every slot the primary had,
// and others met its 503). It also checks what the share's clock,
// upstreamSlotLinger, promises of the real server (with the reset that
// frees a slot at the primary's first ping): each ended stream's slot is
// free within it, in real time. The gateway's clock is then moved past
// it, so the gateway lets the device's streams through and the primary
// answers each: 503 while it holds the slot (polled), 200 once free
// (review34 R6: it slept exactly the constant, which held only by
// coincidence of the two clocks).
func TestRealStreamShareHoldsAtThePrimary(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, []Device{{ID: "alice", Label: "alice", Read: []string{"shared"}, Agents: []string{"pi@alice"}, ReadRate: 1e9}}, u)
	open := func(base, token string) (int, context.CancelFunc) {
		t.Helper()
		code, _, _, cancel := openRealStream(t, base, token)
		return code, cancel
	}
	for i := range 6 {
		if code, _ := open(srv.Base, srv.Token); code != 200 {
			t.Fatalf("the primary's stream %d: %d", i, code)
		}
	}
	var ended []time.Time
	for i := range 2 {
		code, hangUp := open(g.http.URL, g.tokens["alice"])
		if code != 200 {
			t.Fatalf("alice's stream %d: %d", i, code)
		}
		hangUp()
		for deadline := time.Now().Add(5 * time.Second); len(g.srv.open.all()) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the gateway still holds the stream alice hung up")
			}
		}
		ended = append(ended, time.Now())
	}
	if code, _ := open(g.http.URL, g.tokens["alice"]); code != http.StatusTooManyRequests {
		t.Fatalf("alice's third stream within %s: %d, want 429", upstreamSlotLinger, code)
	}
	g.advance(upstreamSlotLinger)
	for i, e := range ended {
		for code, _ := open(g.http.URL, g.tokens["alice"]); code != 200; code, _ = open(g.http.URL, g.tokens["alice"]) {
			if code != http.StatusServiceUnavailable {
				t.Fatalf("alice's stream %d, the gateway's share free: %d, want 200 or the primary's 503", i, code)
			}
			if time.Since(e) > upstreamSlotLinger {
				t.Fatalf("the primary still holds slot %d %s after the gateway ended its stream: upstreamSlotLinger is too short", i, time.Since(e).Round(time.Millisecond))
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("the primary's slot %d free %s after its stream ended", i, time.Since(e).Round(time.Millisecond))
	}
}

// openRealStream opens alice's stream at base as token: its status, and
// for one not 200 its Retry-After and body; the stream is hung up at
// cleanup, or by the func returned.
func openRealStream(t *testing.T, base, token string) (int, string, string, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/logstream/stream?to_agent=pi@alice", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == 200 {
		return 200, "", "", cancel
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b), cancel
}

// TestRealStreamReconnectWaitHolds: against real MemPalace serve, its 8
// slots held by six clients of its own and alice's 2 streams a minute
// old, alice's reconnect from sleep ends her old stream for the new one,
// whose slot the primary frees only at its next ping: the primary
// answers 503 with its Retry-After of 5, and the gateway's says the time
// until the slot is surely freed (upstreamSlotLinger), naming alice; a
// client that follows it, once, gets its stream. Before, the gateway
// relayed the 5, and a client following it was refused twice more
// (attack119 F1).
func TestRealStreamReconnectWaitHolds(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, []Device{{ID: "alice", Label: "alice", Read: []string{"shared"}, Agents: []string{"pi@alice"}, ReadRate: 1e9}}, u)
	for i := range 6 {
		if code, _, body, _ := openRealStream(t, srv.Base, srv.Token); code != 200 {
			t.Fatalf("the primary's stream %d: %d %s", i, code, body)
		}
	}
	for i := range 2 {
		if code, _, body, _ := openRealStream(t, g.http.URL, g.tokens["alice"]); code != 200 {
			t.Fatalf("alice's stream %d: %d %s", i, code, body)
		}
	}
	g.advance(streamReplaceAge)
	code, retry, body, _ := openRealStream(t, g.http.URL, g.tokens["alice"])
	secs, err := strconv.Atoi(retry)
	if code != http.StatusServiceUnavailable || err != nil || secs != int(upstreamSlotLinger/time.Second) || !strings.Contains(body, "(alice: 1)") {
		t.Fatalf("alice's reconnect, the primary's slots all held: %d, Retry-After %q (want 503, 20, naming alice), %s", code, retry, body)
	}
	time.Sleep(time.Duration(secs) * time.Second)
	g.advance(time.Duration(secs) * time.Second)
	if code, retry, body, _ := openRealStream(t, g.http.URL, g.tokens["alice"]); code != 200 {
		t.Fatalf("alice's reconnect after the Retry-After: %d, Retry-After %q, %s", code, retry, body)
	}
}
