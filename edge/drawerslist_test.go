package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// get_drawers' lists MemPalace 3.11.0 refuses (mcp_server/tools_write.py,
// _bulk_ids_error), with its refusal.
var refusedLists = []struct{ ids, refusal string }{
	{`[]`, "drawer_ids must not be empty"},
	{`"abc"`, "drawer_ids must be a list of drawer IDs"},
	{`[` + strings.TrimSuffix(strings.Repeat(`"drawer_w_r_1",`, 501), ",") + `]`, "drawer_ids holds 501 ids, but the bulk fetch accepts at most 500 per call"},
}

// While the local palace is busy, a get_drawers of a list MemPalace
// refuses is refused as MemPalace would, never an empty answer that
// reads as success (nor 501 drawers "not found").
func TestABusyGetDrawersOfABadListIsRefused(t *testing.T) {
	t.Parallel()
	e, _, _, _ := routerUnderTest(t)
	for _, l := range refusedLists {
		c := newCall(&mcp.CallToolParams{Name: "mempalace_get_drawers", Arguments: json.RawMessage(`{"drawer_ids": ` + l.ids + `}`)})
		text, _ := objectText(e.byIDMissing(context.Background(), c, nil, errLocalBusy))
		if m := objectMap(text); m["error"] != l.refusal || m["results"] != nil {
			t.Errorf("get_drawers of %.20s while the local palace is busy: %v, want MemPalace's refusal %q", l.ids, m, l.refusal)
		}
	}
}

// bulkRefusing answers get_drawers as MemPalace 3.11.0 answers a list
// it refuses, before it looks at the palace (an empty one too).
type bulkRefusing struct{ emptyLocal }

func (l bulkRefusing) Call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	var a struct {
		DrawerIDs []string `json:"drawer_ids"`
	}
	json.Unmarshal(p.Arguments.(json.RawMessage), &a)
	if p.Name == "mempalace_get_drawers" && len(a.DrawerIDs) > 500 {
		return jsonResult(map[string]any{"error": fmt.Sprintf("drawer_ids holds %d ids, but the bulk fetch accepts at most 500 per call", len(a.DrawerIDs))}, false), nil
	}
	return l.emptyLocal.Call(ctx, p)
}

// On a palace that holds no drawers yet, the local palace's refusal of
// 501 ids is the answer: not 501 drawers "not found", nor the primary
// asked for them.
func TestAnEmptyPalacesRefusalOfTooManyIdsStands(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	e.localServer = bulkRefusing{}
	l := refusedLists[2]
	var ids []string
	json.Unmarshal([]byte(l.ids), &ids)
	m := routed(t, e, "mempalace_get_drawers", map[string]any{"drawer_ids": ids})
	if m["error"] != l.refusal || m["results"] != nil {
		t.Errorf("get_drawers of 501 ids on an empty palace: %.300v, want MemPalace's refusal %q", m, l.refusal)
	}
	if n := primary.pl.Calls("mempalace_get_drawers"); n != 0 {
		t.Errorf("the primary was asked %d get_drawers for a list the local palace refused", n)
	}
}
