package edge

import (
	"context"
	"maps"
	"math"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
)

// maxDrawerPage is MemPalace's largest list_drawers page: it caps limit
// at 100.
const maxDrawerPage = 100

// palaceCall is one palace's answer to a call.
type palaceCall func(context.Context, *call) (*mcp.CallToolResult, error)

// drawerWindow is the page a list_drawers call asks for, bounded as
// MemPalace bounds it (offset at least 0, limit 1 to 100; and offset+limit
// an int).
func drawerWindow(args map[string]any) (offset, limit int) {
	return min(max(intArg(args, "offset", 0), 0), math.MaxInt-maxDrawerPage), min(max(intArg(args, "limit", 20), 1), maxDrawerPage)
}

// drawersUpTo is a palace's list_drawers from its first drawer to the end
// of the page the call asks for (offset+limit drawers, or all it has),
// as one answer: the page that the merge cuts the requested page from
// (the union's first offset+limit drawers are among the two sides'
// first offset+limit each). MemPalace sorts a palace's drawers by
// drawer_id and cuts [offset, offset+limit) of that list (tools_write.py,
// _collapse_drawer_rows; Python's code-point order is Go's byte order on
// UTF-8), the order mergeDrawers sorts the union in; so it is asked in
// pages of up to 100, one after the other, until it has given
// offset+limit drawers or a short page (its last). A gateway's page
// counts what it withheld as given.
//
// Cost: one call up to offset+limit 100 (the usual page: the answer as it
// came); a page deep into a large palace costs ceil((offset+limit)/100)
// calls to each palace, at most one past its last drawer (offset 5000:
// 51 each, the two palaces at once), each of which reads the palace's
// whole (filtered) list on MemPalace's side. Not cached: the palaces
// change between calls, and an agent rarely pages that deep.
func drawersUpTo(a palaceCall) palaceCall {
	return func(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
		offset, limit := drawerWindow(c.argsMap())
		need := offset + limit
		var first *mcp.CallToolResult
		var joined map[string]any
		drawers := []any{}
		withheld := 0.0
		for from := 0; from < need; from += maxDrawerPage {
			q := maps.Clone(c.argsMap())
			q["offset"], q["limit"] = from, min(need-from, maxDrawerPage)
			pc, err := c.with(q)
			if err != nil {
				return nil, err
			}
			res, err := a(ctx, pc)
			if _, ok := usable(res, err); !ok || need <= maxDrawerPage {
				return res, err // the side's failure (or its one page) as it came
			}
			m := resultJSON(res)
			ds, ok := m["drawers"].([]any)
			if !ok {
				return res, nil // not a page: as it came
			}
			if first == nil {
				first, joined = res, m
			}
			w, _ := m["untrusted_withheld"].(float64)
			drawers, withheld = append(drawers, ds...), withheld+w
			if t, ok := m["total"]; ok {
				joined["total"] = t // the latest count
			}
			if len(ds)+int(w) < q["limit"].(int) {
				break // its last page
			}
		}
		joined["drawers"], joined["count"], joined["offset"], joined["limit"] = drawers, len(drawers), 0, need
		if withheld > 0 {
			joined["untrusted_withheld"] = withheld
		}
		out := jsonResult(joined, false)
		out.Meta = first.Meta
		return out, nil
	}
}

// requestedPage is one side's list_drawers answer cut to the page the
// agent asked for: each side was asked for the widened page, and a
// degraded answer is one side's. Any other answer is returned as it is.
func requestedPage(shape catalogue.Filter, res *mcp.CallToolResult, args map[string]any) *mcp.CallToolResult {
	if shape != catalogue.FilterDrawers {
		return res
	}
	m := resultJSON(res) // usable: an object text
	ds, ok := m["drawers"].([]any)
	if !ok {
		return res
	}
	offset, limit := drawerWindow(args)
	ds = page(ds, offset, limit)
	m["drawers"], m["count"], m["offset"], m["limit"] = ds, len(ds), offset, limit
	c := *res
	c.Content = jsonResult(m, false).Content
	return &c
}

// page is xs[offset:offset+limit], empty where that is out of range.
func page[T any](xs []T, offset, limit int) []T {
	return xs[min(max(offset, 0), len(xs)):min(max(offset+limit, offset, 0), len(xs))]
}

// mergeDrawers: union by drawer_id, sorted by id (as MemPalace sorts), the
// requested page of the union. A diary entry of this device's and its
// copy on the primary (onPrimary: the copy's id, another) are one record,
// under the local id, as diary_read and search show them (attack99 F6).
func mergeDrawers(lm, pm map[string]any, offset, limit int, onPrimary func(string) string) map[string]any {
	all := union(lm, pm, "drawers", "drawer_id", onPrimary)
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	pg := records(page(all, offset, limit))
	out := maps.Clone(pm) // the primary's envelope: a gateway's filtered and untrusted_withheld
	out["drawers"], out["count"], out["offset"], out["limit"] = pg, len(pg), offset, limit
	out["total"], out["edge"] = unionTotal(lm, pm, len(all))
	return out
}

// unionTotal is a merged list_drawers' total and its edge member. Each
// side gave its drawers from the first to the page's end (drawersUpTo):
// the total is the union of those plus what each side has not given yet,
// exact once both gave all theirs and never less than the union holds, so
// an agent that pages until offset reaches total sees every drawer (its
// last pages may come back short). A side's withheld drawers count as
// given. Without a side's total: at least the larger one, as before.
func unionTotal(lm, pm map[string]any, union int) (float64, map[string]any) {
	edge := map[string]any{"merged": true, "local": "ok", "primary": "ok"}
	lt, lok := lm["total"].(float64)
	pt, pok := pm["total"].(float64)
	if !lok || !pok {
		edge["total"] = "at least; the two palaces overlap"
		return max(lt, pt, float64(union)), edge
	}
	given := func(m map[string]any) float64 {
		ds, _ := m["drawers"].([]any)
		w, _ := m["untrusted_withheld"].(float64)
		return float64(len(ds)) + w
	}
	rest := max(lt-given(lm), 0) + max(pt-given(pm), 0)
	if rest > 0 {
		edge["total"] = "at most: the drawers past this page may be on both palaces"
	}
	return float64(union) + rest, edge
}
