package gateway

import (
	"net/http"
	"testing"
	"time"
)

// A device's 503 for a stream, while a stream the gateway ended lingers
// at the primary, asks it to wait until that slot is freed, or the
// primary's Retry-After if longer, in either of its forms (review36 R5).
// Before, an HTTP-date from the primary was replaced by the gateway's
// seconds even when it was later.
func TestPrimaryFullKeepsTheLaterRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s := &Server{Now: func() time.Time { return now }}
	s.open.gone = []*streamHold{{device: "laptop-7f3a", freed: now.Add(5 * time.Second)}}
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	for _, c := range []struct{ theirs, want string }{
		{"", "5"},
		{"2", "5"},
		{"30", "30"},
		{date(30 * time.Second), "30"},
		{date(2 * time.Second), "5"},
		{"soon", "5"},
	} {
		if _, got := s.primaryFull(c.theirs); got != c.want {
			t.Errorf("the primary's Retry-After %q: the device is told %q (want %q)", c.theirs, got, c.want)
		}
	}
}
