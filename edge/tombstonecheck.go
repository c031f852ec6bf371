package edge

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// MaxTombstoneChecks bounds the tombstones `edge status` asks the primary
// about; the rest are counted, not checked.
const MaxTombstoneChecks = 20

// Remaining is what `edge status` says of this device's tombstones: how
// many there are, those whose record the primary still holds (named for
// the operator: a delete that stayed local), and why the rest could not
// be checked.
type Remaining struct {
	Total     int
	OnPrimary []string // one line each: what, and how to act
	Unchecked string   // "" when every tombstone was checked
}

// CheckTombstones asks the primary, within ctx, which of the outbox's
// tombstoned records it still holds. It never fails for the primary: an
// unreachable one is said in Unchecked.
func CheckTombstones(ctx context.Context, s *outbox.Store, p *Primary) (Remaining, error) {
	ts, err := s.Tombstones(ctx)
	if err != nil {
		return Remaining{}, fmt.Errorf("outbox %s: %w", s.Path(), err)
	}
	r := Remaining{Total: len(ts)}
	if len(ts) == 0 {
		return r, nil
	}
	if p == nil {
		r.Unchecked = "no primary is configured"
		return r, nil
	}
	checked := 0
	for _, t := range ts {
		if checked == MaxTombstoneChecks || ctx.Err() != nil {
			break
		}
		if t.Kind == outbox.TombDrawer && slices.ContainsFunc(ts, func(d outbox.Tombstone) bool { return d.Kind == outbox.TombDiary && d.Key == t.Key }) {
			continue // its diary tombstone is the one asked about
		}
		line, err := onPrimary(ctx, p, t)
		if err != nil {
			r.Unchecked = fmt.Sprintf("could not ask the primary: %v", err)
			return r, nil
		}
		checked++
		if line != "" {
			r.OnPrimary = append(r.OnPrimary, line)
		}
	}
	n := len(ts) - checked // less the drawer tombstones their diary one stood for
	for _, t := range ts {
		if t.Kind == outbox.TombDiary {
			n--
		}
	}
	if n > 0 {
		r.Unchecked = fmt.Sprintf("%d not checked (at most %d are, within the status's time)", n, MaxTombstoneChecks)
	}
	return r, nil
}

// onPrimary is the status line for a tombstoned record the primary still
// holds ("" when it does not).
func onPrimary(ctx context.Context, p *Primary, t outbox.Tombstone) (string, error) {
	pending := ""
	if t.OpID != "" {
		pending = fmt.Sprintf(" (its delete is queued: op %.12s)", t.OpID)
	}
	switch t.Kind {
	case outbox.TombDrawer:
		res, err := ask(ctx, p, "get_drawer", map[string]any{"drawer_id": t.Key})
		if err != nil || !gjson.Get(res, "content").Exists() {
			return "", err
		}
		return fmt.Sprintf("drawer %s is still on the primary%s: an admin device or the operator deletes it (delete_drawer)", t.Key, pending), nil
	case outbox.TombSource:
		res, err := ask(ctx, p, "search", map[string]any{"query": filepath.Base(t.Key), "source_file": t.Key, "limit": 1, "max_distance": 0})
		if err != nil || len(gjson.Get(res, "results").Array()) == 0 {
			return "", err
		}
		return fmt.Sprintf("source %s still has drawers on the primary%s: an admin device or the operator deletes them (delete_by_source)", t.Key, pending), nil
	}
	if len(t.Copies) == 0 {
		return "", nil // no copy of it on the primary is known: nothing to name
	}
	res, err := ask(ctx, p, "diary_read", map[string]any{"agent_name": t.Agent, "last_n": 100})
	if err != nil {
		return "", err
	}
	hides := tombs{diary: []outbox.Tombstone{t}}
	for _, en := range gjson.Get(res, "entries").Array() {
		if hides.diaryHides(strings.ToLower(t.Agent), en) {
			return fmt.Sprintf("diary entry of %s written %s (%q) is still on the primary, under another id: the operator deletes it there", t.Agent, t.Stamp, truncate(t.Text, 40)), nil
		}
	}
	return "", nil
}

// ask calls a read on the primary: the answer's object text, or why not.
func ask(ctx context.Context, p *Primary, tool string, args map[string]any) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := p.Call(cctx, &mcp.CallToolParams{Name: catalogue.Prefix + tool, Arguments: args}, true)
	if err != nil {
		return "", err
	}
	t, ok := objectText(res)
	if !ok || res.IsError {
		return "", fmt.Errorf("%s: the primary answered an error: %s", tool, truncate(resultText(res), 200))
	}
	if msg := gjson.Get(t, "error"); msg.Exists() && !strings.HasPrefix(msg.String(), "Drawer not found") {
		return "", fmt.Errorf("%s: the primary answered an error: %s", tool, truncate(msg.String(), 200))
	}
	return t, nil
}
