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
	var ss sources
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	ss.take("10.0.0.1:1", now, false) // the first sweep is now
	for i := range maxSources + 500 {
		ss.take(fmt.Sprintf("10.%d.%d.%d:4242", i>>16&255, i>>8&255, i&255), now, false)
	}
	if len(ss.m) != maxSources+1 {
		t.Fatalf("%d buckets, want %d and the shared one", len(ss.m), maxSources)
	}
	if ok, _ := ss.take("192.0.2.2:1", now, false); ok {
		t.Fatal("a new source past maxSources did not share the others' bucket")
	}
	if _, due := ss.take("192.0.2.3:1", now.Add(sourceSweep), false); len(due) != 1 || !strings.Contains(due[0].Note, " from other sources ") {
		t.Fatalf("the sweep's lines: %+v", due)
	}
	if len(ss.m) != 1 {
		t.Fatalf("%d buckets after a sweep of full ones, want the one just taken", len(ss.m))
	}
	if a, b := sourceKey("[2001:db8::1]:1"), sourceKey("[2001:db8::2]:2"); a != b || a != "2001:db8::/64" {
		t.Fatalf("an IPv6 source is its /64: %q, %q", a, b)
	}
}
