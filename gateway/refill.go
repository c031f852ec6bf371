package gateway

import (
	"context"
	"fmt"
	"maps"
	"net/http"

	"github.com/joakimp/devbox-config/catalogue"
)

// A diary_read's and a search's page is cut by MemPalace (last_n, limit)
// before the filter leaves out what a device withholds, so a withheld
// record took a slot: the page came back short, and a record the device
// may see fell off it (its own diary entry, shown by its edge as never
// replicated). refillPage asks again for a page wide enough to hold the
// size asked of records the device sees.

// pagedList is the list a read's page is, the argument that sizes it, its
// default and MemPalace's cap on it (_MAX_RESULTS, diary_read's 100); ok
// false for a read whose page is not refilled.
func pagedList(t catalogue.Tool) (list, key string, def, most int, ok bool) {
	switch t.Filter {
	case catalogue.FilterDiary:
		return "entries", "last_n", 10, 100, true
	case catalogue.FilterHits:
		return "results", "limit", 5, 100, true
	}
	return "", "", 0, 0, false
}

// refillPage is out, a filtered answer to req with records the device
// withholds left out, refilled to the size asked: req is asked again
// for a page wider by what was withheld (at least twice as wide, at most
// MemPalace's cap), until the records left hold the size asked, or the
// upstream has no more. Its first records (diary_read's newest, search's
// best) are the page; untrusted_withheld counts what was left out of the
// last page read. out as it came when nothing was withheld, and when a
// wider ask fails (the short page is still the truth, thinned).
func (s *Server) refillPage(ctx context.Context, d *Device, t catalogue.Tool, dec Decision, req *rpcRequest, out []byte) []byte {
	list, key, def, most, ok := pagedList(t)
	if !ok || d.Untrusted != UntrustedWithhold {
		return out
	}
	m := resultOf(out)
	got, listed := m[list].([]any)
	withheld := int(num(m["untrusted_withheld"]))
	want := min(max(numArg(req.Args, key, def), 1), most)
	ctx, cancel := context.WithTimeout(ctx, fillWait)
	defer cancel()
	refilled, asked := false, want
	for listed && withheld > 0 && len(got) < want && len(got)+withheld >= asked && asked < most {
		asked = min(max(2*asked, want+withheld), most)
		args := maps.Clone(req.Args)
		args[key] = asked
		status, page := s.upstreamCall(ctx, toolCall(req.rawID(), req.Tool, args))
		next, err := s.filterAnswer(ctx, d, t, dec, req.rawID(), page)
		wider := resultOf(next)
		more, ok := wider[list].([]any)
		if status != http.StatusOK || err != nil || !ok || wider["error"] != nil {
			return out
		}
		m, got, withheld, refilled = wider, more, int(num(wider["untrusted_withheld"])), true
	}
	// MemPalace reads no wider: older records past the withheld ones are
	// not on this page, and the reader is told so.
	cut := listed && len(got) < want && len(got)+withheld >= most && asked == most
	if !refilled && !cut {
		return out
	}
	if cut {
		m["withheld_cut"] = fmt.Sprintf("the newest %d records MemPalace gives are %d withheld from this device (untrusted writers) and %d it sees; older ones it may see are past them, and %s reads no further (ask the gateway's operator to trust the writer, or to remove what it flooded)", most, withheld, len(got), t.Name)
	}
	got = got[:min(len(got), want)]
	m[list] = got
	for _, n := range []string{"showing", "count"} {
		if _, ok := m[n]; ok {
			m[n] = len(got)
		}
	}
	return textAnswer(req.rawID(), m)
}
