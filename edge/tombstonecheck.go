package edge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
)

// MaxTombstoneChecks bounds the tombstones `edge status` asks the primary
// about; the rest are counted, not checked.
const MaxTombstoneChecks = 20

// Remaining is what `edge status` says of this device's tombstones: how
// many there are, those whose record the primary still holds (named for
// the operator: a delete that stayed local), those the primary answered
// it does not show or could not look up, and why the rest could not be
// checked.
type Remaining struct {
	Total     int
	OnPrimary []string // one line each: what, and how to act
	// NotSeen names each record the gateway answered "not visible to this
	// device" for: gone from the primary, or in a wing this device cannot
	// read (the gateway answers both alike).
	NotSeen []string
	// CheckErrors names each record whose look-up the primary answered
	// with another error (one line each: what, and the error).
	CheckErrors []string
	Unchecked   string // "" when every tombstone was checked
}

// errAnswered is a look-up the primary answered with an error: that
// record's answer, not the primary's state.
var errAnswered = errors.New("the primary answered an error")

// CheckTombstones asks the primary, within ctx, which of the outbox's
// tombstoned records it still holds. It never fails for the primary: an
// answer about one record is that record's (checking goes on); a primary
// that cannot be asked stops the check, said in Unchecked.
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
	var down error
	for _, t := range ts {
		if checked == MaxTombstoneChecks || ctx.Err() != nil {
			break
		}
		if t.Kind == outbox.TombDrawer && slices.ContainsFunc(ts, func(d outbox.Tombstone) bool { return d.Kind == outbox.TombDiary && d.Key == t.Key }) {
			continue // its diary tombstone is the one asked about
		}
		if down = r.check(ctx, p, t, deleteOf(ctx, s, t)); down != nil {
			break
		}
		checked++
	}
	n := len(ts) - checked // less the drawer tombstones their diary one stood for
	for _, t := range ts {
		if t.Kind == outbox.TombDiary {
			n--
		}
	}
	switch {
	case down != nil:
		r.Unchecked = fmt.Sprintf("could not ask the primary, %d not checked: %v", n, down)
	case n > 0:
		r.Unchecked = fmt.Sprintf("%d not checked (at most %d are, within the status's time)", n, MaxTombstoneChecks)
	}
	return r, nil
}

// check asks the primary about one tombstone and files its answer; it
// returns the error only when the primary could not be asked.
func (r *Remaining) check(ctx context.Context, p *Primary, t outbox.Tombstone, del *outbox.Op) error {
	line, err := onPrimary(ctx, p, t, deleteStands(del))
	switch {
	case err == nil:
		if line != "" {
			r.OnPrimary = append(r.OnPrimary, line)
		}
	case notVisible(err):
		r.NotSeen = append(r.NotSeen, fmt.Sprintf("%s: not on the primary, or not visible to this device (the gateway answers both alike)", tombName(t)))
	case errors.Is(err, errAnswered) || rpcAnswer(err):
		r.CheckErrors = append(r.CheckErrors, fmt.Sprintf("%s: not checked: %v", tombName(t), err))
	default:
		return err
	}
	return nil
}

// notVisible reports the gateway's one denial for a record that does not
// exist and one this device may not see (gateway.CodeDenied, with the
// rule the gateway names "the target is not visible to this device").
func notVisible(err error) bool {
	e := peerError(err)
	return e != nil && e.Code == -31003 && strings.Contains(e.Message, "not visible to this device")
}

// rpcAnswer reports a JSON-RPC error the primary answered about this call;
// a rate limit is not one (the next look-up would meet it too).
func rpcAnswer(err error) bool {
	e := peerError(err)
	return e != nil && e.Code != ledger.CodeRateLimited
}

// tombName names a tombstoned record as status lines do.
func tombName(t outbox.Tombstone) string {
	switch t.Kind {
	case outbox.TombDrawer:
		return "drawer " + t.Key
	case outbox.TombSource:
		return "source " + t.Key
	}
	return fmt.Sprintf("diary entry of %s written %s (%q)", t.Agent, t.Stamp, truncate(t.Text, 40))
}

// deleteOf is the op that carries t's delete to the primary (nil: none,
// or not found).
func deleteOf(ctx context.Context, s *outbox.Store, t outbox.Tombstone) *outbox.Op {
	if t.OpID == "" {
		return nil
	}
	o, err := s.GetByID(ctx, t.OpID)
	if err != nil {
		return nil
	}
	return &o
}

// deleteStands says where a tombstoned record's delete for the primary
// stands, for its status line ("": none queued).
func deleteStands(o *outbox.Op) string {
	switch {
	case o == nil:
		return ""
	case o.State == outbox.Dead:
		return fmt.Sprintf(" (its delete, op %s, was refused for good: the DEAD line above)", o.Short())
	case o.State == outbox.InDoubt:
		return fmt.Sprintf(" (its delete, op %s, is in doubt: the IN DOUBT line above)", o.Short())
	}
	return fmt.Sprintf(" (its delete is queued: op %s)", o.Short())
}

// onPrimary is the status line for a tombstoned record the primary still
// holds ("" when it does not); pending is where its delete stands.
func onPrimary(ctx context.Context, p *Primary, t outbox.Tombstone, pending string) (string, error) {
	switch t.Kind {
	case outbox.TombDrawer:
		res, err := ask(ctx, p, "get_drawer", map[string]any{"drawer_id": t.Key})
		if err != nil || !gjson.Get(res, "content").Exists() {
			return "", err
		}
		return fmt.Sprintf("%s is still on the primary%s: an admin device or the operator deletes it (delete_drawer)", tombName(t), pending), nil
	case outbox.TombSource:
		res, err := ask(ctx, p, "search", map[string]any{"query": filepath.Base(t.Key), "source_file": t.Key, "limit": len(t.Shown) + maxNamedIDs, "max_distance": 0})
		var stale []string
		for _, h := range gjson.Get(res, "results").Array() {
			if id := h.Get("drawer_id").String(); !slices.Contains(t.Shown, id) && !slices.Contains(stale, id) {
				stale = append(stale, id)
			}
		}
		switch {
		case err != nil || len(stale) == 0:
			return "", err // none, or only the drawers filed of it since
		case len(t.Shown) > 0:
			return fmt.Sprintf("source %s still has drawers on the primary%s, beside the %d filed of it since: an admin device or the operator deletes them by id (delete_drawers: %s), not by source, which would take the new ones too", t.Key, pending, len(t.Shown), strings.Join(stale, ", ")), nil
		}
		return fmt.Sprintf("source %s still has drawers on the primary%s: an admin device or the operator deletes them (delete_by_source; delete_drawers by their ids where the gateway refuses it, another source sharing its file name)", t.Key, pending), nil
	}
	if len(t.Copies) == 0 {
		return "", nil // no copy of it on the primary is known: nothing to name
	}
	args := map[string]any{"agent_name": t.Agent, "last_n": 100}
	if prefix, _ := entryPrefix(t.Key); prefix != "" {
		args["wing"] = strings.TrimSuffix(strings.TrimPrefix(prefix, "diary_"), "_") // the entry's own wing, not only the agent's diary wing
	}
	res, err := ask(ctx, p, "diary_read", args)
	if err != nil {
		return "", err
	}
	hides := tombs{diary: []outbox.Tombstone{t}}
	for _, en := range gjson.Get(res, "entries").Array() {
		if hides.diaryHides(catalogue.PythonLower(t.Agent), en) {
			// Named by what the primary holds: an edit of the entry made
			// here may never have reached it (attack99 F10).
			return fmt.Sprintf("diary entry of %s written %s (%q) is still on the primary, under another id: the operator deletes it there",
				t.Agent, en.Get("timestamp").String(), truncate(en.Get("content").String(), 40)), nil
		}
	}
	return "", nil
}

// maxNamedIDs bounds the ids a status line names.
const maxNamedIDs = 10

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
		return "", fmt.Errorf("%s: %w: %s", tool, errAnswered, truncate(resultText(res), 200))
	}
	if msg := gjson.Get(t, "error"); msg.Exists() && !notFound(msg.String()) {
		return "", fmt.Errorf("%s: %w: %s", tool, errAnswered, truncate(msg.String(), 200))
	}
	return t, nil
}
