package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// TestRefusedLookUpBehindTheLedger: a device that may write its diary
// wing but not read it, and the gateway's answer to a diary-carrying write
// (a checkpoint with a diary, a diary_write) lost once. The replay's
// look-up (the diary's suffix) is refused by the gateway, and could never
// succeed: behind the op-id ledger the write is resent under its op id and
// answered from the record (once on the primary, op done); a gateway
// without its ledger (not how `devbox-config gateway` runs) leaves the op
// dead with the refusal as its error, for an operator, and nothing twice.
// Before, the op stayed queued forever, retried, blocking every later op
// (found by an attacker pass).
func TestRefusedLookUpBehindTheLedger(t *testing.T) {
	devs := map[string]Device{
		"reads all":        {ID: "dev1", Label: "lab", Read: []string{"*"}, Write: []string{"*"}, Agents: []string{"pi@lab"}},
		"narrow":           {ID: "dev1", Label: "lab", Read: []string{"w", "wing_pi"}, Write: []string{"w", "wing_pi"}, Agents: []string{"pi@lab"}},
		"diary write-only": {ID: "dev1", Label: "lab", Read: []string{"w"}, Write: []string{"w", "wing_pi"}, Agents: []string{"pi@lab"}, ReadRate: 1e9, WriteRate: 1e9},
	}
	writes := map[string]struct {
		tool string
		args map[string]any
	}{
		"checkpoint": {"mempalace_checkpoint", map[string]any{"items": []any{map[string]any{"wing": "w", "room": "r", "content": "gw checkpoint item"}},
			"diary": map[string]any{"agent_name": "pi", "entry": "gw checkpoint diary"}}},
		"diary_write": {"mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": "gw checkpoint diary"}},
	}
	for name, dev := range devs {
		for wname, w := range writes {
			for _, withLedger := range []bool{true, false} {
				t.Run(name+"/"+wname+map[bool]string{true: "/ledger", false: "/no ledger"}[withLedger], func(t *testing.T) {
					g := newGW(t, []Device{dev})
					if withLedger {
						g.withLedger()
					}
					front := realpalace.NewProxy(t, g.http.URL)
					front.Drop(w.tool)
					st, p, f := edgeOutbox(t, front.URL, g.tokens["dev1"])
					f.MaxRefusals = 3
					ctx := context.Background()
					b, _ := json.Marshal(w.args)
					if _, err := st.Enqueue(ctx, outbox.Write{Name: w.tool, Payload: b}); err != nil {
						t.Fatal(err)
					}
					s := drain(t, st, p, f, 3*time.Second)
					ops, _ := st.List(ctx, 10)
					for _, o := range ops {
						t.Logf("op %s state %s attempts %d err %s", o.ID[:12], o.State, o.Attempts, o.Error)
					}
					d := g.primary.Dump()
					items, diaries := 0, 0
					for _, dr := range d.Drawers {
						switch dr.Content {
						case "gw checkpoint item":
							items++
						case "gw checkpoint diary":
							diaries++
						}
					}
					t.Logf("lost %v; upstream: items %d diaries %d", front.Lost(), items, diaries)
					wantItems := 0
					if wname == "checkpoint" {
						wantItems = 1
					}
					if items != wantItems || diaries != 1 {
						t.Errorf("primary holds %d items and %d diary entries; want %d and 1", items, diaries, wantItems)
					}
					refused := name == "diary write-only" && !withLedger
					switch {
					case refused:
						if s.ByState[outbox.Dead] != 1 || len(ops) != 1 || !strings.Contains(string(ops[0].Error), "read globs do not match") {
							t.Errorf("want the op dead with the gateway's refusal as its error; stats %+v", s.ByState)
						}
					case s.ByState[outbox.Queued]+s.ByState[outbox.Inflight]+s.ByState[outbox.Dead] != 0:
						t.Errorf("want the op done; stats %+v", s.ByState)
					}
				})
			}
		}
	}
}
