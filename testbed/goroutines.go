package testbed

import (
	"runtime"
	"strings"
)

// GoroutinesOf lists the goroutines running now, with no grace, whose
// stack names fn (e.g. "edge.(*Primary)"), other than the caller's. Not
// listed: one in runtime.goexit1, or one that has started (its frame has an
// offset) and is in no call but its own function: each owned goroutine here
// is a function that calls its work and then Done, so it has returned from
// its work and run its deferred Done, which is all a WaitGroup can see. One
// not started yet (at its entry, no offset) is listed.
func GoroutinesOf(fn string) []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		running, _, _ := strings.Cut(g, "\ncreated by ")
		frames := strings.Split(running, "\n")[1:] // a function line, then its file line
		returned := strings.HasPrefix(frames[0], "runtime.goexit1(") || len(frames) <= 2 && strings.Contains(frames[len(frames)-1], " +0x")
		if i == 0 || !strings.Contains(g, fn) || returned {
			continue // the first is the caller's
		}
		out = append(out, g)
	}
	return out
}
