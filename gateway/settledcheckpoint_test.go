package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// A checkpoint whose upstream answer was lost after MemPalace filed its
// items and its diary entry: the gateway settles it, and the items it
// filed carry the writer's origin (before, the settled answer named only
// the diary entry, and the items read as of unknown origin, which a
// device with a trusted set does not trust).
func TestSettledCheckpointStampsItsItems(t *testing.T) {
	settledCheckpoint(t, startFake(t).url)
}

// settledCheckpoint is the test above against the upstream at url.
func settledCheckpoint(t *testing.T, url string) {
	proxy := realpalace.NewProxy(t, url)
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	g := newGWAt(t, []Device{{ID: "ops", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, Agents: []string{"pi@ops"}}},
		&upstream{name: "a cutting proxy", url: front.URL + "/mcp"})
	g.withLedger()
	item := map[string]any{"wing": "notes", "room": "standups", "content": "a unique item filed by the settled checkpoint"}
	args := map[string]any{"items": []any{item}, "diary": map[string]any{"agent_name": "pi", "entry": "standup: x"}}
	// An entry before it: real MemPalace answers the look-up before the
	// write with an error while it holds no drawer, and the gateway then
	// leaves a lost answer unsettled.
	if res, rpc, _ := g.call(g.tokens["ops"], "diary_write", map[string]any{"agent_name": "pi", "entry": "standup: before"}); rpc != nil || res["success"] != true {
		t.Fatalf("an entry before: %v %v", res, rpc)
	}
	proxy.Drop("mempalace_checkpoint")
	if status, m := g.postOp(g.tokens["ops"], "mempalace_checkpoint", args, strings.Repeat("c", 64)); status != 200 {
		t.Fatalf("a checkpoint whose answer was lost after it was made: %d %v, want it settled", status, m)
	}
	if lost := proxy.Lost(); len(lost) != 1 {
		t.Fatalf("answers lost: %v", lost)
	}
	id := catalogue.DrawerID("notes", "standups", str(item["content"]))
	if got := g.srv.upstreamResult(context.Background(), "mempalace_get_drawer", map[string]any{"drawer_id": id}); got["drawer_id"] != id {
		t.Fatalf("item %s not filed: %v", id, got)
	}
	if st, ok := g.srv.prov.Lookup(provenance.Drawer(id)); !ok || st.Device != "ops" {
		t.Fatalf("checkpoint item %s filed by ops: stamp %v (%v) after a settled answer, want ops's", id, st, ok)
	}
}

// A checkpoint's items on the primary without its writer's stamp (its
// first send filed them, and its answer was lost) come back as duplicates
// of themselves when it is sent again: they get the writer's stamp; a
// duplicate another device filed keeps that device's. The same for a
// device that does not read every wing (the gateway answers its
// duplicates itself).
func TestResentCheckpointStampsItsItemsThatLanded(t *testing.T) {
	for _, reads := range []string{"*", "notes"} {
		t.Run("reads "+reads, func(t *testing.T) { resentCheckpoint(t, reads) })
	}
}

func resentCheckpoint(t *testing.T, reads string) {
	fake := startFake(t)
	g := newGWAt(t, []Device{
		{ID: "ops", Label: "ops", Read: []string{reads}, Write: []string{"*"}, Agents: []string{"pi@ops"}},
		{ID: "dev", Label: "dev", Read: []string{"*"}, Write: []string{"*"}},
	}, fake)
	landed := map[string]any{"wing": "notes", "room": "standups", "content": "an item whose first send landed"}
	theirs := map[string]any{"wing": "notes", "room": "standups", "content": "an item dev filed first"}
	// The first send, its answer lost: what it filed is stamped by no one.
	if res := g.srv.upstreamResult(context.Background(), "mempalace_checkpoint", map[string]any{"items": []any{landed}}); len(res["added"].([]any)) != 1 {
		t.Fatalf("the first send: %v", res)
	}
	if res, rpc, _ := g.call(g.tokens["dev"], "add_drawer", theirs); rpc != nil || res["success"] != true {
		t.Fatalf("dev's drawer: %v %v", res, rpc)
	}
	res, rpc, _ := g.call(g.tokens["ops"], "checkpoint", map[string]any{"items": []any{landed, theirs}, "diary": map[string]any{"agent_name": "pi", "entry": "standup: y"}})
	if dups, _ := res["duplicates"].([]any); rpc != nil || len(dups) != 2 {
		t.Fatalf("the re-send: %v %v, want both items as duplicates", res, rpc)
	}
	for item, want := range map[string]string{str(landed["content"]): "ops", str(theirs["content"]): "dev"} {
		id := catalogue.DrawerID("notes", "standups", item)
		if st, ok := g.srv.prov.Lookup(provenance.Drawer(id)); !ok || st.Device != want {
			t.Errorf("%q (%s): stamp %v (%v), want %s's", item, id, st, ok, want)
		}
	}
}
