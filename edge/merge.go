package edge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// canaryTolerance is how far two distances for one drawer may differ
// before the embedders are taken to differ (RFC 001 §7.4).
const canaryTolerance = 1e-3

// mergedRead asks both palaces in parallel (the latency is the slower
// side's, not the sum) and merges; with one side failing it answers from
// the other, marked degraded.
func (e *Edge) mergedRead(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	orig := p
	type out struct {
		res *mcp.CallToolResult
		err error
	}
	if strings.HasSuffix(p.Name, "list_drawers") {
		// Page the union: both sides from the start, up to the end of the
		// requested page.
		a := argsMap(p.Arguments)
		want := min(intArg(a, "offset", 0)+intArg(a, "limit", 20), 100)
		q := copyMap(a)
		q["offset"], q["limit"] = 0, want
		b, _ := json.Marshal(q)
		p = &mcp.CallToolParams{Name: p.Name, Arguments: json.RawMessage(b), Meta: p.Meta}
	}
	pc := make(chan out, 1)
	go func() {
		r, err := e.callPrimary(ctx, p, true)
		pc <- out{r, err}
	}()
	local, lerr := e.child.Call(ctx, p)
	prim := <-pc
	lm, pm := resultJSON(local), resultJSON(prim.res)
	if lerr == nil && local != nil && local.IsError {
		lm = nil
	}
	if prim.err == nil && prim.res != nil && prim.res.IsError {
		pm = nil
	}
	switch {
	case lm != nil && pm != nil && lm["error"] == nil && pm["error"] == nil:
	case lm != nil && lm["error"] == nil:
		why := "unusable answer"
		if prim.err != nil {
			why = prim.err.Error()
		} else if pm != nil {
			why = fmt.Sprint(pm["error"])
		}
		return annotate(local, map[string]any{"local": "ok", "primary": why}, true), nil
	case pm != nil && pm["error"] == nil:
		why := "unusable answer"
		if lerr != nil {
			why = lerr.Error()
		}
		return annotate(prim.res, map[string]any{"local": why, "primary": "ok"}, true), nil
	default:
		// Neither side gave a usable answer: the local one as it is.
		return e.local(ctx, p)
	}
	args := argsMap(orig.Arguments)
	var merged map[string]any
	switch strings.TrimPrefix(p.Name, "mempalace_") {
	case "search":
		merged = e.mergeSearch(lm, pm, intArg(args, "limit", 5))
	case "check_duplicate":
		merged = mergeDuplicates(lm, pm)
	case "diary_read":
		merged = mergeDiary(lm, pm, intArg(args, "last_n", 10))
	case "list_drawers":
		merged = mergeDrawers(lm, pm, intArg(args, "offset", 0), intArg(args, "limit", 20))
	default:
		merged = pm
	}
	return jsonResult(merged, false), nil
}

func intArg(m map[string]any, k string, def int) int {
	switch v := m[k].(type) {
	case float64:
		return int(v)
	case string:
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil {
			return n
		}
	}
	return def
}

// hitKey is a hit's identity: drawer_id, or for 3.6.0 hits without one,
// wing + room + sha256(text).
func hitKey(h map[string]any) string {
	if id, ok := h["drawer_id"].(string); ok && id != "" {
		return id
	}
	sum := sha256.Sum256([]byte(fmt.Sprint(h["text"])))
	return fmt.Sprint(h["wing"], "\x00", h["room"], "\x00", hex.EncodeToString(sum[:]))
}

func (e *Edge) mergeSearch(lm, pm map[string]any, limit int) map[string]any {
	lh, _ := lm["results"].([]any)
	ph, _ := pm["results"].([]any)
	local := map[string]map[string]any{}
	for _, x := range lh {
		if h, ok := x.(map[string]any); ok {
			local[hitKey(h)] = h
		}
	}
	// Embedder canary: one drawer on both sides with different distances
	// means different embedding models; comparing their distances would be
	// silent garbage, so only the primary's ranking is returned.
	for _, x := range ph {
		h, _ := x.(map[string]any)
		if l, ok := local[hitKey(h)]; ok {
			ld, lok := l["distance"].(float64)
			pd, pok := h["distance"].(float64)
			if lok && pok && math.Abs(ld-pd) > canaryTolerance {
				e.embedderMismatch(fmt.Sprintf("drawer %s: local distance %.4f, primary %.4f", hitKey(h), ld, pd))
				out := copyMap(pm)
				for _, y := range ph {
					if hh, ok := y.(map[string]any); ok {
						hh["origin"] = "primary"
					}
				}
				out["edge"] = map[string]any{"merged": false, "embedder_mismatch": true, "detail": e.mismatchDetail(), "local": "ok", "primary": "ok"}
				out["embedder_mismatch"] = true
				return out
			}
		}
	}
	seen := map[string]map[string]any{}
	var all []map[string]any
	add := func(hits []any, origin string) {
		for _, x := range hits {
			h, ok := x.(map[string]any)
			if !ok {
				continue
			}
			k := hitKey(h)
			if prev, ok := seen[k]; ok {
				prev["origin"] = "both"
				continue
			}
			c := copyMap(h)
			c["origin"] = origin
			seen[k] = c
			all = append(all, c)
		}
	}
	add(lh, "local")
	add(ph, "primary")
	sort.SliceStable(all, func(i, j int) bool { return dist(all[i]) < dist(all[j]) })
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	out := copyMap(pm)
	res := make([]any, len(all))
	for i, h := range all {
		res[i] = h
	}
	out["results"] = res
	out["edge"] = map[string]any{"merged": true, "local": "ok", "primary": "ok"}
	return out
}

func dist(h map[string]any) float64 {
	if d, ok := h["distance"].(float64); ok {
		return d
	}
	return math.Inf(1) // BM25-only hits have no distance: last
}

func (e *Edge) embedderMismatch(detail string) {
	e.mu.Lock()
	first := e.mismatch == ""
	if first {
		e.mismatch = detail
	}
	e.mu.Unlock()
	if first {
		e.log.Error("embedder mismatch between the local palace and the primary: merged search is off, only the primary's results are returned", "detail", detail)
		if e.outbox != nil {
			e.outbox.SetMeta(context.Background(), "embedder_mismatch", detail)
		}
	}
}

func (e *Edge) mismatchDetail() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mismatch
}

func mergeDuplicates(lm, pm map[string]any) map[string]any {
	seen := map[string]bool{}
	var all []map[string]any
	for _, side := range []struct {
		m      map[string]any
		origin string
	}{{lm, "local"}, {pm, "primary"}} {
		ms, _ := side.m["matches"].([]any)
		for _, x := range ms {
			h, ok := x.(map[string]any)
			if !ok {
				continue
			}
			id := fmt.Sprint(h["id"])
			if seen[id] {
				continue
			}
			seen[id] = true
			c := copyMap(h)
			c["origin"] = side.origin
			all = append(all, c)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return num(all[i]["similarity"]) > num(all[j]["similarity"]) })
	if len(all) > 5 {
		all = all[:5]
	}
	res := make([]any, len(all))
	for i, h := range all {
		res[i] = h
	}
	return map[string]any{"is_duplicate": len(all) > 0, "matches": res, "edge": map[string]any{"merged": true, "local": "ok", "primary": "ok"}}
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// mergeDiary: union, deduplicated by content (a replicated entry has a
// different timestamp on the primary: it was written at flush time),
// newest first, cut to last_n.
func mergeDiary(lm, pm map[string]any, lastN int) map[string]any {
	seen := map[string]bool{}
	var all []map[string]any
	for _, side := range []map[string]any{lm, pm} {
		es, _ := side["entries"].([]any)
		for _, x := range es {
			h, ok := x.(map[string]any)
			if !ok {
				continue
			}
			k := fmt.Sprint(h["topic"], "\x00", h["content"])
			if seen[k] {
				continue
			}
			seen[k] = true
			all = append(all, h)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return fmt.Sprint(all[i]["timestamp"]) > fmt.Sprint(all[j]["timestamp"]) })
	if lastN > 0 && len(all) > lastN {
		all = all[:lastN]
	}
	res := make([]any, len(all))
	for i, h := range all {
		res[i] = h
	}
	out := copyMap(pm)
	if out["agent"] == nil {
		out["agent"] = lm["agent"]
	}
	delete(out, "message")
	out["entries"], out["showing"] = res, len(res)
	out["total"] = max(num(lm["total"]), num(pm["total"]), float64(len(all)))
	out["edge"] = map[string]any{"merged": true, "local": "ok", "primary": "ok"}
	return out
}

// mergeDrawers: union by drawer_id, sorted by id (as MemPalace sorts), the
// requested page of the union.
func mergeDrawers(lm, pm map[string]any, offset, limit int) map[string]any {
	byID := map[string]map[string]any{}
	for _, side := range []map[string]any{lm, pm} {
		ds, _ := side["drawers"].([]any)
		for _, x := range ds {
			if d, ok := x.(map[string]any); ok {
				if _, dup := byID[fmt.Sprint(d["drawer_id"])]; !dup {
					byID[fmt.Sprint(d["drawer_id"])] = d
				}
			}
		}
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	page := []any{}
	for i := offset; i < len(ids) && i < offset+limit; i++ {
		page = append(page, byID[ids[i]])
	}
	return map[string]any{
		"drawers": page, "count": len(page), "offset": offset, "limit": limit,
		"total": max(num(lm["total"]), num(pm["total"]), float64(len(ids))),
		"edge":  map[string]any{"merged": true, "local": "ok", "primary": "ok", "total": "at least; the two palaces overlap"},
	}
}

func copyMap(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
