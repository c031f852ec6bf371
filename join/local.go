package join

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/strictjson"
)

// Caller is one tool call answering the JSON object of the result's text
// (outbox.Primary's shape, which edge.FlushTarget gives for the primary).
type Caller interface {
	Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error)
}

// Record types, the keys of the report's sent/skipped objects.
const (
	Drawers = "drawers"
	Diaries = "diaries"
	Facts   = "facts"
)

// Kinds lists the record types in report order.
var Kinds = []string{Drawers, Diaries, Facts}

// Record is one local record and the write that replays it.
type Record struct {
	Kind    string
	Tool    string
	Args    map[string]any
	Wing    string // "" for facts
	LocalID string // drawers and diaries
	Content string // drawers and diaries: the full content (for verification)
	Closed  bool   // facts: valid_to is set
	// Closes: a kg_invalidate's, the local closed fact it puts on the
	// primary (factsOnPrimary).
	Closes fact
	// Ordinal: a diary entry is the n-th of the local palace's entries
	// with its wing, agent and text (the primary must hold n of them).
	Ordinal int
}

// key identifies the write: tool, arguments (json.Marshal sorts keys)
// and, for a diary entry, which of its equal entries it is.
func (r Record) key() string { return keyOf(r.Tool, r.Args, r.Ordinal) }

// entryKey groups a diary entry with the entries the primary counts as
// equal to it: its wing and text (the id suffix), whatever the topic.
func (r Record) entryKey() string { return r.Wing + "\x00" + catalogue.EntrySuffix(r.Content) }

func keyOf(tool string, args map[string]any, ordinal int) string {
	b, _ := json.Marshal(args) // values decoded from JSON: they encode
	k := tool + "\x00" + string(b)
	if ordinal > 1 {
		k += fmt.Sprintf("\x00%d", ordinal)
	}
	return k
}

// childCaller reads the local palace through the edge's child supervisor.
type childCaller struct{ c *edge.Child }

func (l childCaller) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	res, err := l.c.Call(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(b)})
	if err != nil {
		return nil, fmt.Errorf("local palace: %s: %w", tool, err)
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(t.Text), &m); err == nil {
				return m, nil
			}
		}
	}
	return nil, fmt.Errorf("local palace: %s answered no JSON object", tool)
}

// Selection is what a join reads: the policy's replicated wings, narrowed
// by --wing globs.
type Selection struct {
	Policy *edge.Policy
	Globs  []string // none: every replicated wing
	// Stamp, when set, is the added_by every replayed drawer gets
	// ("<agent>/<label>/<device>", §7.3.4); empty: nothing is stamped.
	Stamp string
}

func (s Selection) narrowed(wing string) bool {
	// start checked every glob
	return len(s.Globs) > 0 && !slices.ContainsFunc(s.Globs, func(g string) bool { ok, _ := path.Match(g, wing); return ok })
}

// Manifest is what the local palace holds for the primary.
type Manifest struct {
	Records []Record
	// Excluded: wings policy.json marks local; Narrowed: wings --wing
	// leaves out.
	Excluded, Narrowed []string
	// FactsSource says how the facts were read.
	FactsSource string
	// KGExcluded: policy.json marks the knowledge graph local.
	KGExcluded bool
	// Failed: local records that could not be read.
	Failed []Failure
	// NoDrawers: the local palace holds no drawers yet (MemPalace keeps no
	// drawer collection for it), so it has no drawers or diaries to read.
	NoDrawers bool
}

// Failure names a record that did not reach the primary, and why.
type Failure struct {
	Kind   string `json:"type"`
	Record string `json:"record"`
	Wing   string `json:"wing,omitempty"`
	Error  string `json:"error"`
}

// errorOf is a tool answer's own failure ("error", success:false).
func errorOf(m map[string]any) error {
	if e, ok := m["error"]; ok {
		return fmt.Errorf("%v", e)
	}
	if m["success"] == false {
		return errors.New("success: false")
	}
	return nil
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

// readLocal pages the local palace: every drawer of every selected wing,
// full content by get_drawers (r.size() ids a call; get_drawer one by one
// from a palace before 3.11.0), diaries told apart by their room and type;
// then the knowledge graph's facts. empty tells a palace that holds no
// drawers yet from a broken one (palacefiles.Empty): MemPalace answers
// list_wings on both with an error; the first has no wings to read.
func readLocal(ctx context.Context, r *reader, sel Selection, kg kgReader, empty func() (bool, error), progress func(string, int)) (Manifest, error) {
	var man Manifest
	w, err := r.c.Call(ctx, "mempalace_list_wings", map[string]any{})
	if err != nil {
		return man, err
	}
	if err := errorOf(w); err != nil {
		switch none, why := empty(); {
		case why != nil:
			return man, fmt.Errorf("local palace: list_wings: %w (whether the palace holds drawers is unknown: %v)", err, why)
		case !none:
			return man, fmt.Errorf("local palace: list_wings: %w", err)
		}
		man.NoDrawers, w = true, nil
	}
	counts, _ := w["wings"].(map[string]any)
	seen := map[string]bool{}
	for _, wing := range slices.Sorted(maps.Keys(counts)) {
		switch {
		case !sel.Policy.Replicated(wing):
			man.Excluded = append(man.Excluded, wing)
		case sel.narrowed(wing):
			man.Narrowed = append(man.Narrowed, wing)
		default:
			if err := man.readWing(ctx, r, wing, sel.Stamp, seen, progress); err != nil {
				return man, err
			}
		}
	}
	if !sel.Policy.KGReplicated() {
		man.KGExcluded = true
		return man, nil
	}
	man.readFacts(ctx, r.c, kg)
	return man, nil
}

// readWing adds a wing's drawers: listed by list_drawers page by page
// (seen: the drawers already read, in another wing's listing), then read
// in full by r.
func (man *Manifest) readWing(ctx context.Context, r *reader, wing, stamp string, seen map[string]bool, progress func(string, int)) error {
	var ids []string
	err := eachDrawer(ctx, r.c, "local palace", map[string]any{"wing": wing}, func(row map[string]any) {
		if id := str(row, "drawer_id"); id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	})
	if err != nil {
		return err
	}
	for start := 0; start < len(ids); start += r.size() {
		batch := ids[start:min(start+r.size(), len(ids))]
		got := r.read(ctx, batch)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("local palace: %w", err)
		}
		for _, id := range batch {
			rec, err := drawerRecord(got[id], id, wing, stamp)
			if err != nil {
				man.Failed = append(man.Failed, Failure{Kind: Drawers, Record: id, Wing: wing, Error: err.Error()})
				continue
			}
			man.Records = append(man.Records, rec)
		}
		if progress != nil {
			progress("reading the local palace", len(man.Records))
		}
	}
	return nil
}

// eachDrawer pages list_drawers with filter on c (who: for a refusal's
// error) and calls fn for every row.
func eachDrawer(ctx context.Context, c Caller, who string, filter map[string]any, fn func(row map[string]any)) error {
	for offset := 0; ; {
		filter["limit"], filter["offset"] = 100, offset
		page, err := c.Call(ctx, "mempalace_list_drawers", filter)
		if err != nil {
			return err
		}
		if err := errorOf(page); err != nil {
			return fmt.Errorf("%s: list_drawers %s: %w", who, filter["wing"], err)
		}
		rows, _ := page["drawers"].([]any)
		for _, x := range rows {
			row, _ := x.(map[string]any)
			fn(row)
		}
		offset += len(rows)
		if total, _ := strictjson.Float(page["total"]); len(rows) == 0 || float64(offset) >= total {
			return nil
		}
	}
}

// readFacts adds the knowledge graph's facts; one that cannot be read is a
// failure of the facts alone.
func (man *Manifest) readFacts(ctx context.Context, local Caller, kg kgReader) {
	facts, source, err := kg.read(ctx, local)
	if err != nil {
		man.Failed = append(man.Failed, Failure{Kind: Facts, Record: "knowledge graph", Error: err.Error()})
		man.FactsSource = "none: " + err.Error()
		return
	}
	man.FactsSource = source
	for _, f := range facts {
		args := map[string]any{"subject": f.Subject, "predicate": f.Predicate, "object": f.Object}
		if f.ValidFrom != "" {
			args["valid_from"] = f.ValidFrom
		}
		if f.ValidTo != "" {
			args["valid_to"] = f.ValidTo
		}
		man.Records = append(man.Records, Record{Kind: Facts, Tool: "mempalace_kg_add", Args: args, Closed: f.ValidTo != ""})
	}
}

// drawerRecord builds the write that replays one logical drawer, read in
// full (list_drawers holds only a 200-character preview).
func drawerRecord(read drawerRead, id, wing, stamp string) (Record, error) {
	if err := read.why("local palace"); err != nil {
		return Record{}, err
	}
	d := read.res
	content := str(d, "content")
	if content == "" {
		return Record{}, errors.New("the local palace answered no content for it")
	}
	if ok, why := complete(d, content); !ok {
		// Replayed, it would be a truncated copy under another id.
		return Record{}, fmt.Errorf("the local palace holds it truncated (%s): not sent; repair it in the local palace first", why)
	}
	meta, _ := d["metadata"].(map[string]any) // nil reads as empty
	room := cmp.Or(str(d, "room"), str(meta, "room"))
	if isDiary(id, room, meta) {
		agent := cmp.Or(str(meta, "agent"), strings.TrimPrefix(wing, "wing_"))
		args := map[string]any{"agent_name": agent, "entry": content, "wing": wing}
		if t := str(meta, "topic"); t != "" {
			args["topic"] = t
		}
		return Record{Kind: Diaries, Tool: "mempalace_diary_write", Args: args, Wing: catalogue.DiaryWingFor(args), LocalID: id, Content: content}, nil
	}
	args := map[string]any{"wing": wing, "room": room, "content": content}
	if sf := str(meta, "source_file"); sf != "" {
		args["source_file"] = sf
	}
	switch by := str(meta, "added_by"); {
	case stamp != "":
		args["added_by"] = stamp
	case by != "":
		args["added_by"] = by // the record's own value, replayed verbatim
	}
	return Record{Kind: Drawers, Tool: "mempalace_add_drawer", Args: args, Wing: wing, LocalID: id, Content: content}, nil
}

// isDiary: a diary_write entry (room "diary", type diary_entry or a diary
// id), not a drawer someone filed in a room called diary.
func isDiary(id, room string, meta map[string]any) bool {
	return room == "diary" && (str(meta, "type") == "diary_entry" || strings.HasPrefix(id, "diary_"))
}
