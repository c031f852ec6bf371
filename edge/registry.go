package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/mailbox"
)

// toolSource is where a listed tool's definition (the description and
// schema the model reads) came from. A better source replaces it; the
// tool itself is never removed.
type toolSource int

const (
	byCatalogue toolSource = iota + 1 // no server has listed it yet (addStopgapTools)
	byPrimary                         // only the primary lists it: the catalogue's words, the primary's argument types (primaryDefinition)
	byLocal                           // the local palace server's own definition
)

// addTools registers tools; fromPrimary marks the primary's list. Of the
// primary's, only the tools the catalogue knows are listed (a tool only
// the primary names could not be answered), and none with the primary's
// words: a hostile primary's description would be put before the model.
// The local server's definition replaces any other, whichever list came
// first. Tools are never removed: the list an agent saw stays the same,
// online or offline.
func (e *Edge) addTools(tools []*mcp.Tool, fromPrimary bool) {
	e.regMu.Lock()
	e.mu.Lock()
	var add []*mcp.Tool
	known, src := e.childTools, byLocal
	if fromPrimary {
		known, src = e.primaryTools, byPrimary
	}
	for _, t := range tools {
		def := t
		if fromPrimary {
			rec, ok := catalogue.Lookup(t.Name)
			if !ok || t.Name != catalogue.Prefix+rec.Name {
				e.unlistedOnce(t.Name)
				continue
			}
			def = primaryDefinition(t, rec)
		}
		known[t.Name] = t
		if e.listedFrom[t.Name] >= src {
			continue
		}
		if st := sanitizeTool(def); st != nil {
			e.listedFrom[t.Name] = src
			add = append(add, st)
		} else {
			e.log.Warn("tool skipped: its input schema is not an object schema", "tool", mailbox.Printable(t.Name))
		}
	}
	e.mu.Unlock()
	for _, t := range add {
		e.server.AddTool(t, e.handler) // replaces an earlier definition of the same name
	}
	e.mu.Lock()
	if !fromPrimary {
		e.childListed = true // only now: its tools are registered
		e.childOnce.Do(func() { close(e.childKnown) })
	}
	childListed, primaryKnown := e.childListed, len(e.primaryTools) > 0
	e.mu.Unlock()
	e.regMu.Unlock() // "listed" means AddTool is done; readiness may add the stopgap list
	if (childListed || e.childDown.Load()) && (primaryKnown || e.cfg.PassThrough()) {
		e.markToolsReady()
	}
	if !e.cfg.PassThrough() && childListed {
		// Only a full view is cached: a cache written before the child's
		// list was in would make every tool look primary-only next time,
		// and writes would skip the local palace.
		e.saveToolCache()
	}
}

// unlistedOnce logs, once a run, a tool only the primary lists that the
// catalogue does not know (under e.mu).
func (e *Edge) unlistedOnce(name string) {
	if !e.unlisted[name] {
		e.unlisted[name] = true
		e.log.Info("a tool only the primary lists, unknown to the catalogue, is not listed", "tool", mailbox.Printable(name))
	}
}

// primaryDefinition is what the model reads of a tool the primary lists
// and the local server does not (yet): a description in devbox-config's
// words, and of the primary's input schema only the arguments the
// catalogue knows, with their types and nothing the primary wrote as
// text (titles, descriptions, examples, defaults: schemaShape).
func primaryDefinition(t *mcp.Tool, rec catalogue.Tool) *mcp.Tool {
	props := map[string]any{}
	var required []any
	if s, ok := t.InputSchema.(map[string]any); ok {
		p, _ := s["properties"].(map[string]any)
		for name, v := range p {
			if rec.Accepts(name) {
				props[name] = schemaShape(v)
			}
		}
		r, _ := s["required"].([]any)
		for _, name := range r {
			if n, ok := name.(string); ok && props[n] != nil {
				required = append(required, n)
			}
		}
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	return &mcp.Tool{Name: t.Name, Description: "MemPalace " + rec.Name + ", answered by the primary palace: the local MemPalace does not list it (the primary's own description is not passed on)", InputSchema: schema}
}

// schemaShape keeps of an argument's schema its shape and nothing a
// sentence could hide in: the type (a JSON type name), enum values that
// are bare names or numbers, and an array's items, shaped the same; an
// object's properties, whose names only the primary gives, are not kept.
// Bounds are not kept either: the primary's could make a tool look
// uncallable.
func schemaShape(v any) any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	if t, ok := m["type"].(string); ok && jsonType(t) {
		out["type"] = t
	}
	if l, ok := m["enum"].([]any); ok && !slices.ContainsFunc(l, notAValue) {
		out["enum"] = l
	}
	if items, ok := m["items"]; ok && out["type"] == "array" {
		out["items"] = schemaShape(items)
	}
	return out
}

// notAValue reports an enum value that is not a bare name, a number, a
// boolean or null: an object or a list could hold a sentence.
func notAValue(v any) bool {
	switch v := v.(type) {
	case string:
		return !bareName(v)
	case float64, json.Number, bool, nil:
		return false
	}
	return true
}

// jsonType reports one of JSON schema's type names.
func jsonType(t string) bool {
	switch t {
	case "string", "number", "integer", "boolean", "object", "array", "null":
		return true
	}
	return false
}

// bareName reports a name of at most 64 letters, digits, "_", "-" and
// ".": an enum value, which cannot carry a sentence.
func bareName(s string) bool {
	return s != "" && len(s) <= 64 && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == ""
}

// sanitizeTool guards go-sdk's AddTool, which panics on a schema without
// "type":"object", and makes the texts the model reads printable
// (mailbox.Printable; a description keeps its lines), whichever server
// wrote them.
func sanitizeTool(t *mcp.Tool) *mcp.Tool {
	c := *t
	c.Title, c.Description = mailbox.Printable(t.Title), printableLines(t.Description)
	c.InputSchema = printableSchema(t.InputSchema)
	if t.Annotations != nil {
		a := *t.Annotations
		a.Title = mailbox.Printable(a.Title)
		c.Annotations = &a
	}
	switch s := c.InputSchema.(type) {
	case nil:
		c.InputSchema = map[string]any{"type": "object"}
	case map[string]any:
		if s["type"] == nil {
			s["type"] = "object" // s is printableSchema's copy
		} else if s["type"] != "object" {
			return nil
		}
	}
	return &c
}

// printableLines is s made printable line by line: it keeps its "\n".
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = mailbox.Printable(l)
	}
	return strings.Join(lines, "\n")
}

// printableSchema is a copy of a JSON schema whose "title" and
// "description" strings, at any depth, are printableLines: the model
// reads them as it reads the tool's description.
func printableSchema(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "title" || k == "description") {
				m[k] = printableLines(s)
			} else {
				m[k] = printableSchema(x)
			}
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			l[i] = printableSchema(x)
		}
		return l
	}
	return v
}

type toolCache struct {
	Child   []*mcp.Tool `json:"child"`
	Primary []*mcp.Tool `json:"primary"`
}

const toolCacheFile = "tools.json"

// loadToolCache registers the tools last seen, so the list is there at
// once, offline too, before the child or the primary answer.
func (e *Edge) loadToolCache() {
	file := filepath.Join(e.cfg.StateDir(), toolCacheFile)
	b, err := filewrite.ReadRegular(file, 64<<20)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			e.log.Warn("the cached tool list cannot be read; starting without it", "err", err)
		}
		return
	}
	var c toolCache
	if err := json.Unmarshal(b, &c); err != nil {
		e.log.Warn("the cached tool list is not valid JSON; starting without it", "file", file, "err", err)
		return
	}
	e.addTools(c.Primary, true)
	if len(c.Child) > 0 {
		e.addTools(c.Child, false)
	}
}

func (e *Edge) saveToolCache() {
	e.mu.Lock()
	var c toolCache
	for name, t := range e.primaryTools {
		if e.childTools[name] == nil { // the primary's own, raw: only its argument types are ever listed
			c.Primary = append(c.Primary, t)
		}
	}
	for _, t := range e.childTools {
		c.Child = append(c.Child, t)
	}
	e.mu.Unlock()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		e.log.Warn("the tool list cannot be cached", "err", err)
		return
	}
	if _, err := filewrite.Write(filepath.Join(e.cfg.StateDir(), toolCacheFile), b, 0o600); err != nil {
		// The list an agent sees stays the same; only the next start
		// without a primary or a local server lists fewer tools.
		e.log.Warn("the tool list cannot be cached", "err", err)
	}
}

// primaryOnlyTool reports a tool the primary has and the local palace
// does not (a newer primary). Until the child's list is known, no tool is
// judged primary-only.
func (e *Edge) primaryOnlyTool(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, onPrimary := e.primaryTools[name]
	return onPrimary && e.childListed && e.childTools[name] == nil
}

// listed reports whether the edge lists a tool (the SDK answers the rest).
func (e *Edge) listed(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.listedFrom[name] != 0
}

// addStopgapTools registers the catalogue's tools when the edge knows none
// at all: no cached list, no local palace server, no primary reached. Each
// is named and takes the arguments MemPalace's schema lists; the first real
// list replaces it (addTools). So tools never vanish, even on a fresh
// palace with nothing running.
func (e *Edge) addStopgapTools() {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	e.mu.Lock()
	if len(e.childTools)+len(e.primaryTools) > 0 || e.cfg.PassThrough() {
		e.mu.Unlock()
		return
	}
	var add []*mcp.Tool
	for _, rec := range catalogue.All() {
		name := catalogue.Prefix + rec.Name
		e.listedFrom[name] = byCatalogue
		add = append(add, &mcp.Tool{Name: name, Description: rec.Description(), InputSchema: rec.InputSchema()})
	}
	e.mu.Unlock()
	e.log.Warn("no tool list is known (no cache, the local palace server is not running, the primary not reached): listing the catalogue's tools", "tools", len(add))
	for _, t := range add {
		e.server.AddTool(t, e.handler)
	}
}

// readyWhenChild marks the tools ready as soon as the child's list is in
// (or it failed to start), at most ToolsWait from now.
func (e *Edge) readyWhenChild(ctx context.Context) {
	t := time.NewTimer(e.cfg.ToolsWait)
	defer t.Stop()
	select {
	case <-e.childKnown:
	case <-t.C:
	case <-ctx.Done():
		return
	}
	e.markToolsReady()
}

// waitTools waits for the first tool list, at most ToolsWait (no timer
// once the tools are known).
func (e *Edge) waitTools(ctx context.Context) {
	select {
	case <-e.toolsReady:
	default:
		select {
		case <-e.toolsReady:
		case <-time.After(e.cfg.ToolsWait):
		case <-ctx.Done():
		}
	}
}

// toolsKnown reports the first tool list known (or waited for long
// enough): the tools listed are the edge's.
func (e *Edge) toolsKnown() bool { return answered(e.toolsReady) }

// markToolsReady lets tools/list and tools/call through; with no tool
// known at all, the catalogue's stand in.
func (e *Edge) markToolsReady() {
	e.readyOnce.Do(func() {
		e.addStopgapTools()
		close(e.toolsReady)
	})
}

// localServerDown is the child supervisor's word that the local palace server
// did not start: calls fail at once, and the tools are ready with what is
// known (the cache, the primary's list, else the catalogue's).
func (e *Edge) localServerDown(err error) {
	e.log.Error("the local palace server did not start; the edge runs degraded (reads from the primary, writes queued)", "err", err)
	e.childDown.Store(true)
	e.childOnce.Do(func() { close(e.childKnown) })
	e.mu.Lock()
	primaryKnown := len(e.primaryTools) > 0
	e.mu.Unlock()
	if e.cfg.PassThrough() || primaryKnown || (e.primary != nil && !e.primary.Up()) {
		e.markToolsReady()
	}
}
