package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// attack69 F2: a client with no token sent 4,300 401s a second, each
// with its line. Past its source's burst such a request is answered 429
// with no line; a line a minute counts them, and the chain verifies.
// A device with its token is not held back by its address's flood.
func TestAFloodWithNoTokenIsBoundedPerSource(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	flood := func(n int) map[int]int {
		codes := map[int]int{}
		for range n {
			status, _ := g.post("", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			codes[status]++
		}
		return codes
	}
	if codes := flood(sourceBurst + 50); codes[401] != sourceBurst || codes[429] != 50 {
		t.Fatalf("%d requests with no token at once: %v, want %d 401s and 50 429s", sourceBurst+50, codes, sourceBurst)
	}
	for _, path := range []string{"/healthz", "/nothere"} {
		if status := g.get("", path, nil); status != 429 {
			t.Fatalf("GET %s with no token past the burst: %d, want 429", path, status)
		}
	}
	if status := g.get("wrong", "/mcp", nil); status != 429 {
		t.Fatalf("a wrong token past the burst: %d, want 429", status)
	}
	if _, rpc, status := g.call(g.tokens["desk-9b21"], "kg_stats", nil); status != 200 || rpc != nil {
		t.Fatalf("a device from the flooding address: HTTP %d, %v", status, rpc)
	}
	g.advance(time.Second) // sourceRate more
	if codes := flood(sourceRate + 1); codes[401] != sourceRate || codes[429] != 1 {
		t.Fatalf("a second later: %v, want %d 401s and one 429", codes, sourceRate)
	}
	count := func(rule Rule) (n int, notes []string) {
		for _, e := range g.auditLog() {
			if e.Rule == rule {
				n++
				notes = append(notes, e.Note)
			}
		}
		return n, notes
	}
	if n, _ := count(ruleAuthenticate); n != sourceBurst+sourceRate {
		t.Fatalf("%d lines of refused tokens, want one per request answered 401 (%d)", n, sourceBurst+sourceRate)
	}
	g.advance(time.Minute)
	g.get("", "/healthz", nil) // the sweep's line comes with the next request
	if n, notes := count(ruleRateSource); n != 1 || !strings.HasPrefix(notes[0], fmt.Sprintf("%d requests naming no device from 127.0.0.1 ", 50+3+1)) {
		t.Fatalf("the lines counting what was refused with no line: %q", notes)
	}
	if _, err := Verify(g.srv.cfg.Load().AuditLog, nil); err != nil {
		t.Fatal(err)
	}
}

// Many addresses grow the buckets to maxSources; a new one past them
// shares one bucket, and a sweep drops the buckets that are full.
func TestSourcesAreBounded(t *testing.T) {
	t.Parallel()
	var rs refusals
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	rs.take("10.0.0.1:1", now, false) // the first sweep is now
	for i := range maxSources + 500 {
		rs.take(fmt.Sprintf("10.%d.%d.%d:4242", i>>16&255, i>>8&255, i&255), now, false)
	}
	if len(rs.sources) != maxSources+1 {
		t.Fatalf("%d buckets, want %d and the shared one", len(rs.sources), maxSources)
	}
	if ok, _ := rs.take("192.0.2.2:1", now, false); ok {
		t.Fatal("a new source past maxSources did not share the others' bucket")
	}
	if _, due := rs.take("192.0.2.3:1", now.Add(sweepEvery), false); len(due) != 1 || !strings.Contains(due[0].Note, " from other sources ") {
		t.Fatalf("the sweep's lines: %+v", due)
	}
	if len(rs.sources) != 1 {
		t.Fatalf("%d buckets after a sweep of full ones, want the one just taken", len(rs.sources))
	}
	if a, b := sourceKey("[2001:db8::1]:1"), sourceKey("[2001:db8::2]:2"); a != b || a != "2001:db8::/64" {
		t.Fatalf("an IPv6 source is its /64: %q, %q", a, b)
	}
}

// attack72 F5: a device over its read rate wrote a line per refusal,
// 3,400 a second. Past its first deviceLines refusals by its rates in a
// minute, a refusal has no line of its own: the sweep's line counts
// them by rule, and so does the gateway's at its end. Every request
// answered otherwise keeps its line, and the chain verifies.
func TestADeviceOverItsRatesIsSummarised(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk := g.tokens["desk-9b21"]
	lines := g.auditLines
	var written, wRefused int
	for i := range 40 { // write burst 20
		_, rpc, _ := g.call(desk, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": fmt.Sprintf("note %d", i)})
		if rpc != nil && rpc["code"] == float64(CodeRateLimited) {
			wRefused++
		} else {
			written++
		}
	}
	flood := func(n int) (found, refused int) {
		for range n {
			switch g.get(desk, "/nothere", nil) {
			case 404:
				found++
			case 429:
				refused++
			}
		}
		return found, refused
	}
	found, rRefused := flood(300) // read burst 100
	if wRefused <= deviceLines || rRefused == 0 {
		t.Fatalf("%d writes and 300 reads at once were refused %d and %d times", 40, wRefused, rRefused)
	}
	if n, _ := lines(ruleRateWrite); n != deviceLines {
		t.Fatalf("%d lines of refusals by the write rate, want the first %d", n, deviceLines)
	}
	if n, _ := lines(ruleRateRead); n != 0 {
		t.Fatalf("%d lines of refusals by the read rate past the first %d refusals", n, deviceLines)
	}
	if n, _ := lines(ruleNoRoute); n != found {
		t.Fatalf("%d 404 lines for %d 404s", n, found)
	}
	allowed := 0
	for _, e := range g.auditLog() {
		if e.Tool == "mempalace_add_drawer" && e.Decision == VerdictAllow {
			allowed++
		}
	}
	if allowed != written {
		t.Fatalf("%d lines of writes made for %d writes made", allowed, written)
	}
	g.advance(sweepEvery)
	g.get("", "/healthz", nil) // the sweep's line comes with the next request
	want := fmt.Sprintf("%d requests of desk-9b21 refused with no line of their own since 2026-11-30T12:00:00Z (%d by rate:read, %d by rate:write)", rRefused+wRefused-deviceLines, rRefused, wRefused-deviceLines)
	if n, notes := lines(ruleRateDevice); n != 1 || notes[0] != want {
		t.Fatalf("the lines counting the device's refusals: %q, want %q", notes, want)
	}

	_, rRefused = flood(150) // a new minute: deviceLines lined again, the rest counted at the end
	if n, _ := lines(ruleRateRead); n != deviceLines || rRefused <= deviceLines {
		t.Fatalf("a minute later, %d refusals by the read rate left %d lines, want %d", rRefused, n, deviceLines)
	}
	g.srv.Close()
	if n, notes := lines(ruleRateDevice); n != 2 || !strings.HasPrefix(notes[1], fmt.Sprintf("%d requests of desk-9b21 ", rRefused-deviceLines)) {
		t.Fatalf("the lines counting the device's refusals at the gateway's end: %q", notes)
	}
	if _, err := Verify(g.srv.cfg.Load().AuditLog, nil); err != nil {
		t.Fatal(err)
	}
}

// A device's requests past its maxInFlight and its streams past its share
// are refused 429 and wrote a line each: a device could flood the log
// with them as with its rates. They share its deviceLines lines a minute
// with its rate refusals, and past those its rate:device line counts
// them by rule; the chain verifies.
func TestADeviceOverItsFlightAndStreamsIsSummarised(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk := g.tokens["desk-9b21"]
	lines := g.auditLines
	g.srv.flight.mu.Lock()
	g.srv.flight.n = map[string]int{"desk-9b21": maxInFlight} // as if its 32 were being served
	g.srv.flight.mu.Unlock()
	for i := range 15 {
		if status, _ := g.post(desk, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); status != 429 {
			t.Fatalf("ping %d past the device's requests in flight: %d, want 429", i, status)
		}
	}
	g.srv.flight.mu.Lock()
	g.srv.flight.n = nil
	g.srv.flight.mu.Unlock()
	for range DefaultStreamShare { // its share, fresh: a new stream may end none
		g.srv.open.add(&streamHold{device: "desk-9b21", end: func() {}, opened: g.clock()}, DefaultStreamShare)
	}
	for i := range 15 {
		if status := g.get(desk, "/logstream/stream?to_agent=pi@desk", nil); status != 429 {
			t.Fatalf("stream %d past the device's share: %d, want 429", i, status)
		}
	}
	inFlight, _ := lines(ruleInFlight)
	streams, _ := lines(ruleStreamShare)
	if inFlight != deviceLines || streams != 0 {
		t.Fatalf("%d in_flight and %d stream:share lines for 15 refusals of each, want the first %d", inFlight, streams, deviceLines)
	}
	g.advance(sweepEvery)
	g.get("", "/healthz", nil) // the sweep's line comes with the next request
	want := "20 requests of desk-9b21 refused with no line of their own since 2026-11-30T12:00:00Z (5 by in_flight, 15 by stream:share)"
	if n, notes := lines(ruleRateDevice); n != 1 || notes[0] != want {
		t.Fatalf("the lines counting the device's refusals: %q, want %q", notes, want)
	}
	if _, err := Verify(g.srv.cfg.Load().AuditLog, nil); err != nil {
		t.Fatal(err)
	}
}

// auditLines is the number of g's audit lines of rule, and their notes.
func (g *gw) auditLines(rule Rule) (n int, notes []string) {
	for _, e := range g.auditLog() {
		if e.Rule == rule {
			n++
			notes = append(notes, e.Note)
		}
	}
	return n, notes
}
