package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
)

// fanOut reports whether a palace-wide read must be answered wing by
// wing: upstream cuts search hits and drawer pages to their limit over
// every wing, so an answer cut afterwards to the readable wings would come
// back short wherever another wing's drawers ranked or sorted in, telling
// a device they exist (and, paged through, how many).
func fanOut(d *Device, t catalogue.Tool, args map[string]any) bool {
	if d.readsAll() || (t.Filter != catalogue.FilterHits && t.Filter != catalogue.FilterDrawers) {
		return false
	}
	w, _ := args["wing"].(string)
	return w == ""
}

// errCLIText: a palace-wide search asking for the CLI's text output
// (cli_compatible, 3.9+) answers with one formatted text over every wing,
// which no filter can cut; asked wing by wing it would come back without
// that text. Naming a readable wing makes it one forwarded call (as does
// a device that reads one wing only).
var errCLIText = &denial{ruleCLIText, "cli_compatible answers with the CLI's text over every wing, which the gateway cannot cut to this device's wings: name a wing it reads"}

// denial is an error of the forward step that refuses the call (not a
// failure of the gateway's), audited under rule.
type denial struct {
	rule Rule
	msg  string
}

func (e *denial) Error() string { return e.msg }

// maxFanPage is upstream's largest page (list_drawers and search limit).
const maxFanPage = 100

// answerByWing answers a palace-wide search or list_drawers over the
// readable wings only: the same call once per readable wing (each
// answer checked by the filter step), merged as upstream orders them
// (search by similarity, drawers by id) and cut to the limit. Totals are
// then exact over the readable wings.
func (s *Server) answerByWing(ctx context.Context, d *Device, t catalogue.Tool, req *rpcRequest) (int, []byte, error) {
	limit, key := numArg(req.Args, "limit", 5), "results"
	if t.Filter == catalogue.FilterDrawers {
		limit, key = numArg(req.Args, "limit", 20), "drawers"
	}
	limit = min(max(limit, 1), maxFanPage)
	offset := max(numArg(req.Args, "offset", 0), 0)
	readable := s.readableWings(ctx, d)
	if len(readable) == 1 {
		// One wing: the call itself, pinned to it, is the answer.
		args := maps.Clone(req.Args)
		args["wing"] = readable[0]
		status, resp := s.upstreamCall(ctx, toolCall(req.rawID(), req.Tool, args))
		if status != http.StatusOK {
			return status, resp, nil
		}
		out, err := s.filterAnswer(ctx, d, t, Decision{Allow: true, Wing: readable[0]}, req.rawID(), resp)
		return status, out, err
	}
	if v, asked := req.Args["cli_compatible"]; asked && v != false {
		return 0, nil, errCLIText
	}
	// The wings are asked at once; each one's pages in turn.
	answers := make([]wingAnswer, len(readable))
	var wg sync.WaitGroup
	for i, w := range readable {
		wg.Go(func() { answers[i] = s.askWing(ctx, d, t, req, w, key, offset+limit) })
	}
	wg.Wait()
	return mergeWings(t, req, answers, limit, offset)
}

// mergeWings is the answer of the wings' answers: their items merged as
// upstream orders them (search by similarity, drawers by id) and cut to
// limit (from offset for drawers), or the first wing's error, passed on.
func mergeWings(t catalogue.Tool, req *rpcRequest, answers []wingAnswer, limit, offset int) (int, []byte, error) {
	items := []map[string]any{}
	total, withheld := 0, 0
	for _, a := range answers {
		if a.err != nil {
			return 0, nil, a.err
		}
		if a.passOn != nil {
			return a.status, a.passOn, nil
		}
		items = append(items, a.items...)
		total, withheld = total+a.total, withheld+a.withheld
	}
	var m map[string]any
	if t.Filter == catalogue.FilterHits {
		slices.SortStableFunc(items, func(a, b map[string]any) int { return cmp.Compare(num(b["similarity"]), num(a["similarity"])) })
		items = items[:min(len(items), limit)]
		m = map[string]any{"query": req.Args["query"], "filters": map[string]any{"wing": nil, "room": req.Args["room"], "source_file": req.Args["source_file"]}, "results": items}
	} else {
		slices.SortStableFunc(items, func(a, b map[string]any) int { return cmp.Compare(str(a["drawer_id"]), str(b["drawer_id"])) })
		page := items[min(offset, len(items)):min(offset+limit, len(items))]
		m = map[string]any{"drawers": page, "total": total, "count": len(page), "offset": offset, "limit": limit}
	}
	m["filtered"] = true
	if withheld > 0 {
		m["untrusted_withheld"] = withheld // by the wings' answers: the device withholds what it does not trust
	}
	return http.StatusOK, textAnswer(req.rawID(), m), nil
}

// textAnswer is a tools/call answer as MemPalace writes one: m, indented,
// as its one text block (m holds values decoded from JSON, or plain ones:
// it encodes).
func textAnswer(id json.RawMessage, m map[string]any) []byte {
	text, _ := json.MarshalIndent(m, "", "  ")
	return encodeJSON(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}}})
}

// readableWings lists the wings a device reads, sorted: its read grants
// themselves when none is a pattern (no upstream call: a named wing that
// does not exist answers empty), else the upstream's wings they match.
func (s *Server) readableWings(ctx context.Context, d *Device) []string {
	if !slices.ContainsFunc(d.Read, func(g string) bool { return strings.ContainsAny(g, `*?[\`) }) {
		wings := slices.Clone(d.Read)
		if d.instructions != "" {
			wings = append(wings, d.instructions)
		}
		return slices.Compact(slices.Sorted(slices.Values(wings)))
	}
	wingCounts, _ := s.upstreamResult(ctx, catalogue.Prefix+"list_wings", map[string]any{})["wings"].(map[string]any)
	var readable []string
	for _, w := range slices.Sorted(maps.Keys(wingCounts)) {
		if d.reads(w) {
			readable = append(readable, w)
		}
	}
	return readable
}

// wingAnswer is one wing's part of a wing-by-wing answer; passOn is an
// answer to pass on instead (upstream's error).
type wingAnswer struct {
	items    []map[string]any
	total    int
	withheld int // records of untrusted origin left out
	status   int
	passOn   []byte
	err      error
}

// askWing asks the call for wing w: one search, or list_drawers pages
// until need rows (or the wing's end), each checked by the filter step.
func (s *Server) askWing(ctx context.Context, d *Device, t catalogue.Tool, req *rpcRequest, w, key string, need int) wingAnswer {
	var a wingAnswer
	for page := 0; ; page++ {
		args := maps.Clone(req.Args)
		args["wing"] = w
		if t.Filter == catalogue.FilterDrawers {
			args["offset"], args["limit"] = page*maxFanPage, maxFanPage
		}
		status, resp := s.upstreamCall(ctx, toolCall(req.rawID(), req.Tool, args))
		if status != http.StatusOK {
			return wingAnswer{status: status, passOn: resp}
		}
		out, err := s.filterAnswer(ctx, d, t, Decision{Allow: true, Wing: w}, req.rawID(), resp)
		if err != nil {
			return wingAnswer{err: err}
		}
		m := resultOf(out)
		if m == nil || m["error"] != nil {
			return wingAnswer{status: status, passOn: out} // upstream's error, passed on
		}
		n, _ := m["untrusted_withheld"].(float64)
		a.withheld += int(n)
		list, _ := m[key].([]any)
		for _, x := range list {
			if it := x.(map[string]any); it["wing"] == w { // this wing's, once
				a.items = append(a.items, it)
			}
		}
		if t.Filter != catalogue.FilterDrawers {
			return a
		}
		if page == 0 {
			n, _ := m["total"].(float64)
			a.total = int(n)
		}
		if len(list)+int(n) < maxFanPage || (page+1)*maxFanPage >= need {
			return a
		}
	}
}

// numArg reads an integer argument (a number or a numeric string, as
// upstream coerces), else def.
func numArg(args map[string]any, k string, def int) int {
	if n, ok := catalogue.IntArg(args[k]); ok { // the parse refused what is not one (catalogue.CheckValues)
		return n
	}
	return def
}

func num(v any) float64 { f, _ := v.(float64); return f }

func str(v any) string { s, _ := v.(string); return s }

// waitVisible keeps an event_wait waiting, for a device that is not a
// coordinator, while upstream wakes it only for events the device cannot
// see: it asks again from the last of those events with the time left, and
// answers timed_out when the time is up, so an early return never tells it
// that someone else's event arrived. resp is upstream's raw answer.
func (s *Server) waitVisible(ctx context.Context, d *Device, t catalogue.Tool, req *rpcRequest, start time.Time, resp []byte) (int, []byte, error) {
	timeout := time.Duration(min(max(numArg(req.Args, "timeout_ms", 60000), 0), 300000)) * time.Millisecond
	for {
		out, err := s.filterAnswer(ctx, d, t, Decision{Allow: true}, req.rawID(), resp)
		if err != nil {
			return 0, nil, err
		}
		m := resultOf(out)
		raw := resultOf(resp)
		evs, _ := raw["events"].([]any)
		if m == nil || m["error"] != nil || m["count"] != 0.0 || m["timed_out"] == true || len(evs) == 0 {
			return http.StatusOK, out, nil
		}
		left := timeout - time.Since(start)
		last, _ := evs[len(evs)-1].(map[string]any)
		cursor, _ := last["id"].(string)
		if left <= 0 || cursor == "" {
			return http.StatusOK, textAnswer(req.rawID(), map[string]any{"timed_out": true, "events": []any{}, "count": 0, "filtered": true}), nil
		}
		args := maps.Clone(req.Args)
		args["since_event_id"], args["timeout_ms"] = cursor, left.Milliseconds()
		status, next := s.upstreamCall(ctx, toolCall(req.rawID(), req.Tool, args))
		if status != http.StatusOK {
			return status, next, nil
		}
		resp = next
	}
}
