package fingerprint

import (
	"strings"
	"testing"
	"time"
)

func TestCanonicalIgnoresFormattingNotValues(t *testing.T) {
	a, _ := Of([]byte(`{"b": [1, 2], "a": {"y": "<&>", "x": 1.0}}`))
	b, _ := Of([]byte("{\n  \"a\": {\"x\": 1.0, \"y\": \"<&>\"},\n  \"b\": [1,2]\n}"))
	if a != b {
		t.Fatalf("same value, different fingerprints: %s %s", a, b)
	}
	for _, other := range []string{`{"b": [2, 1], "a": {"y": "<&>", "x": 1.0}}`, `{"b": [1, 2], "a": {"y": "<&>", "x": 1}}`} {
		c, _ := Of([]byte(other))
		if c == a {
			t.Errorf("%s has the same fingerprint as a different value", other)
		}
	}
	if got, _ := Canonical([]byte(`{"u": "<&>"}`)); string(got) != `{"u":"<&>"}` {
		t.Errorf("canonical form escapes HTML: %s", got)
	}
	if f, _ := Of(nil); f != Absent {
		t.Errorf("Of(nil) = %s", f)
	}
	if _, err := Of([]byte(`{"a":1} x`)); err == nil {
		t.Error("trailing garbage accepted")
	}
}

func TestStateRoundTrip(t *testing.T) {
	s, err := ParseState(nil)
	if err != nil || len(s.Targets) != 0 {
		t.Fatalf("empty state: %v %v", s, err)
	}
	r := Record{File: "opencode.jsonc", Pointer: "/mcp/mempalace", Fingerprint: "sha256:ab", Mode: "edge", WrittenAt: time.Unix(1, 0).UTC()}
	s.Targets["opencode"] = r
	back, err := ParseState(s.Marshal())
	if err != nil || !back.Targets["opencode"].Same(r) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	r2 := r
	r2.WrittenAt = time.Now()
	if !r.Same(r2) {
		t.Error("Same compares the time")
	}
	if _, err := ParseState([]byte(`{"version": 9, "targets": {}}`)); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Errorf("future version: %v", err)
	}
	if _, err := ParseState([]byte(`{`)); err == nil {
		t.Error("corrupt state accepted")
	}
}

// A record with a pending value recognises both renditions as its own:
// the confirmed one (the write did not happen) and the pending one (it
// did, the confirmation did not); anything else is a user's.
func TestRecordOursWithPending(t *testing.T) {
	r := Record{Fingerprint: "sha256:old", Pending: "sha256:new"}
	for live, want := range map[string]string{"sha256:old": "sha256:old", "sha256:new": "sha256:new", "sha256:user": "sha256:old"} {
		if got := r.Ours(live); got != want {
			t.Errorf("Ours(%s) = %s, want %s", live, got, want)
		}
	}
	if r.Same(Record{Fingerprint: "sha256:old"}) {
		t.Error("a pending record is the same as a confirmed one: it would never be confirmed")
	}
	if (Record{Fingerprint: "sha256:x"}).Ours("sha256:y") != "sha256:x" {
		t.Error("without a pending value Ours is the fingerprint")
	}
}
