package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
)

// doomed is what a call will remove from the primary, read just before
// it is forwarded.
type doomed struct {
	drawers []map[string]any // get_drawer payloads: drawer_id, content, wing, room, metadata
	// rows is how many rows MemPalace counts for a delete_by_source (a
	// chunked drawer is one row per chunk); source its source_file.
	rows   int
	source string
}

// errUnknowable: the gateway cannot tell exactly what the call would
// remove, so it is not made.
var errUnknowable = errors.New("cannot tell exactly what it would remove")

// errNoAnswer: the primary did not answer a read the gateway made before
// a write (no result at all: unreachable, timed out, an error in place of
// one). A transient: the write is answered as the primary being busy
// (HTTP 503), which an edge's outbox backs off on, never as refused.
var errNoAnswer = errors.New("the primary did not answer")

// destroys reports a call that removes or replaces drawers on the
// primary, whose drawers go to the trash first. delete_by_source deletes
// only when dry_run is given and is not true (MemPalace's default is a dry
// run, and it tests the value's truth: null and 0 delete too).
func destroys(t catalogue.Tool, args map[string]any) bool {
	switch t.Name {
	case "delete_drawer", "delete_drawers":
		return true
	case "delete_by_source":
		dry, given := args["dry_run"]
		return given && dry != true
	case "update_drawer":
		_, c := args["content"]
		_, w := args["wing"]
		_, r := args["room"]
		return c || w || r // otherwise a no-op
	}
	return false
}

// readDoomed reads the drawers a call will remove (an update_drawer: the
// version it will replace).
func (s *Server) readDoomed(ctx context.Context, t catalogue.Tool, args map[string]any) (doomed, error) {
	switch t.Name {
	case "delete_by_source":
		src, _ := args["source_file"].(string)
		return s.readSource(ctx, src)
	case "delete_drawers":
		list, _ := args["drawer_ids"].([]any)
		var ids []string
		for _, x := range list {
			id, ok := x.(string)
			if !ok {
				return doomed{}, fmt.Errorf("%w: drawer_ids holds a %T", errUnknowable, x)
			}
			ids = append(ids, id)
		}
		ds, err := s.readDrawers(ctx, ids)
		return doomed{drawers: ds}, err
	}
	id, _ := args["drawer_id"].(string)
	ds, err := s.readDrawers(ctx, []string{id})
	return doomed{drawers: ds}, err
}

// getBatch is how many ids one get_drawers call carries (MemPalace's cap).
const getBatch = catalogue.MaxBulkIDs

// readDrawers reads each id's drawer (get_drawers, 3.11.0; get_drawer one
// by one from an upstream without it). An id that names no drawer (or
// any, on a palace that holds none yet) is left out (the delete will find
// nothing there either); one that names a chunk of a drawer is refused:
// MemPalace would delete that one chunk and leave the drawer cut, which no
// re-filing could mend.
func (s *Server) readDrawers(ctx context.Context, ids []string) ([]map[string]any, error) {
	var out []map[string]any
	seen := map[string]bool{}
	for start := 0; start < len(ids); start += getBatch {
		batch := ids[start:min(start+getBatch, len(ids))]
		got, ok := s.upstreamResult(ctx, "mempalace_get_drawers", map[string]any{"drawer_ids": batch})["results"].([]any)
		if !ok {
			got = nil
			for _, id := range batch {
				got = append(got, s.upstreamResult(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": id}))
			}
		}
		for i, x := range got {
			p, _ := x.(map[string]any)
			switch {
			case p == nil:
				return nil, fmt.Errorf("%w: %w get_drawer for %s", errUnknowable, errNoAnswer, batch[i])
			case p["error"] != nil:
				// "Chroma database missing": the palace holds no drawer yet.
				if msg, _ := p["error"].(string); !strings.HasPrefix(msg, "Drawer not found") && msg != "Chroma database missing" {
					return nil, fmt.Errorf("%w: get_drawer %s: %s", errUnknowable, batch[i], msg)
				}
				continue
			}
			meta, _ := p["metadata"].(map[string]any)
			for _, k := range []string{"parent_drawer_id", "parent_entry_id"} {
				if parent, _ := meta[k].(string); parent != "" && parent != batch[i] {
					return nil, fmt.Errorf("%s is one chunk of drawer %s: delete the whole drawer (%s) instead", batch[i], parent, parent)
				}
			}
			if id, _ := p["drawer_id"].(string); id != "" && !seen[id] {
				seen[id] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// listPage is list_drawers' largest page; sourcePages bounds the look-up
// of a source's drawers (500 pages: 50,000 drawers).
const (
	listPage       = 100
	sourcePages    = 500
	sampleComplete = 5 // delete_by_source's sample stops at five (wing, room) pairs
)

// readSource finds exactly the drawers a delete_by_source of src will
// remove. MemPalace's dry run gives only a count of rows and up to five
// (wing, room) pairs, and every answer that lists drawers gives a
// source_file cut to its file name, so the gateway lists the drawers
// whose file name is src's, in the dry run's pairs (or every pair of the
// palace when it named five, the most it names), and accepts them only if their
// rows add up to the dry run's count: every drawer the delete matches has
// that file name, so equal counts mean the same drawers. Anything else
// (two files of one name in other directories, a palace changing under
// the scan, a legacy drawer stored twice) is refused.
func (s *Server) readSource(ctx context.Context, src string) (doomed, error) {
	dry := s.upstreamResult(ctx, "mempalace_delete_by_source", map[string]any{"source_file": src, "dry_run": true})
	count, ok := dry["match_count"].(float64)
	if dry == nil {
		return doomed{}, fmt.Errorf("%w: %w its dry run", errUnknowable, errNoAnswer)
	}
	if !ok || dry["success"] != true {
		return doomed{}, fmt.Errorf("%w: the primary's dry run answered %v", errUnknowable, dry)
	}
	out := doomed{source: src, rows: int(count)}
	if out.rows == 0 {
		return out, nil
	}
	sample, _ := dry["sample"].([]any)
	name := pythonName(src)
	var ids []string
	rows, pages := 0, 0
	for _, scope := range s.sourceScopes(ctx, sample) {
		found, n, err := s.listByName(ctx, scope, name, &pages)
		if err != nil {
			return doomed{}, err
		}
		ids, rows = append(ids, found...), rows+n
	}
	if rows != out.rows {
		return doomed{}, fmt.Errorf("%w: the primary counts %d row(s) from source_file %q, and the drawers named %q hold %d (two files of that name in other directories, or the palace changed meanwhile); delete them by id with delete_drawers instead", errUnknowable, out.rows, src, name, rows)
	}
	ds, err := s.readDrawers(ctx, ids)
	out.drawers = ds
	return out, err
}

// sourceScopes are the (wing, room) pairs to look for a source's drawers
// in: the dry run's sample when it names fewer than five (then it names
// them all), else every pair get_taxonomy names (list_drawers reads a whole
// scope for each page, so pairs cost far less than the whole palace on a
// large one), else the whole palace.
func (s *Server) sourceScopes(ctx context.Context, sample []any) []map[string]any {
	var pairs [][2]string
	if len(sample) > 0 && len(sample) < sampleComplete {
		for _, x := range sample {
			p, _ := x.(map[string]any)
			w, _ := p["wing"].(string)
			r, _ := p["room"].(string)
			pairs = append(pairs, [2]string{w, r})
		}
	} else {
		tax, _ := s.upstreamResult(ctx, "mempalace_get_taxonomy", map[string]any{})["taxonomy"].(map[string]any)
		for w, rooms := range tax {
			rs, _ := rooms.(map[string]any)
			for r := range rs {
				pairs = append(pairs, [2]string{w, r})
			}
		}
	}
	var scopes []map[string]any
	seen := map[[2]string]bool{}
	for _, p := range pairs {
		if p[0] == "" || p[1] == "" { // list_drawers would read it as no filter
			return []map[string]any{{}}
		}
		if !seen[p] {
			seen[p] = true
			scopes = append(scopes, map[string]any{"wing": p[0], "room": p[1]})
		}
	}
	if len(scopes) == 0 {
		return []map[string]any{{}} // the whole palace
	}
	return scopes
}

// listByName pages list_drawers over scope and returns the drawers whose
// source_file is name, with the rows they hold (their chunks); pages
// counts the pages read over every scope, at most sourcePages.
func (s *Server) listByName(ctx context.Context, scope map[string]any, name string, pages *int) (ids []string, rows int, err error) {
	for page := 0; ; page++ {
		if *pages++; *pages > sourcePages {
			return nil, 0, fmt.Errorf("%w: more than %d drawers to look through", errUnknowable, sourcePages*listPage)
		}
		args := map[string]any{"limit": listPage, "offset": page * listPage}
		for k, v := range scope {
			args[k] = v
		}
		res := s.upstreamResult(ctx, "mempalace_list_drawers", args)
		list, ok := res["drawers"].([]any)
		if res == nil {
			return nil, 0, fmt.Errorf("%w: %w list_drawers", errUnknowable, errNoAnswer)
		}
		if !ok {
			return nil, 0, fmt.Errorf("%w: list_drawers answered %v", errUnknowable, res)
		}
		for _, x := range list {
			d, _ := x.(map[string]any)
			meta, _ := d["metadata"].(map[string]any)
			if meta["source_file"] != name {
				continue
			}
			id, _ := d["drawer_id"].(string)
			ids = append(ids, id)
			n, _ := d["chunks"].(float64)
			rows += max(int(n), 1)
		}
		if len(list) < listPage {
			return ids, rows, nil
		}
	}
}

// pythonName is the file name Python's Path(p).name gives, as MemPalace
// cuts source_file in its answers: the last component that is not empty
// or ".", "" when there is none.
func pythonName(p string) string {
	parts := strings.Split(p, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i] != "" && parts[i] != "." {
			return parts[i]
		}
	}
	return ""
}

// metadataOf is a payload's metadata as JSON (an object, "{}" if none).
func metadataOf(p map[string]any) json.RawMessage {
	m, _ := p["metadata"].(map[string]any)
	if m == nil {
		return json.RawMessage("{}")
	}
	b, _ := json.Marshal(m) // decoded from JSON: it encodes
	return b
}
