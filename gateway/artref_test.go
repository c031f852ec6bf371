package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// artRefDevices: alice writes an artifact of her own; carol may not
// read it and knows its id; bob is the innocent addressee (attack93 F3).
var artRefDevices = []Device{
	{ID: "alice", Label: "alice", Read: []string{"alice_*"}, Write: []string{"alice_*"}, Agents: []string{"claude@alice"}, ReadRate: 1e9, WriteRate: 1e9},
	{ID: "bob", Label: "bob", Read: []string{"bob_*"}, Write: []string{"bob_*"}, Agents: []string{"pi@bob"}, ReadRate: 1e9, WriteRate: 1e9},
	{ID: "carol", Label: "carol", Read: []string{"carol_*"}, Write: []string{"carol_*"}, Agents: []string{"codex@carol"}, ReadRate: 1e9, WriteRate: 1e9},
}

// artRefLaundering is the outside tester's repro (attack93 F3): carol,
// who cannot read alice's artifact, names it in an event to bob; the
// event is refused (-31003, saying why) and bob still cannot read it. An
// artifact carol was sent, she may pass on. It returns the artifact id.
func artRefLaundering(t *testing.T, g *gw) string {
	alice, bob, carol := g.tokens["alice"], g.tokens["bob"], g.tokens["carol"]
	put, e, _ := g.call(alice, "artifact_put", map[string]any{"kind": "patch", "content": "--- a/secret\n+++ b/secret\n@@ -1 +1 @@\n-old\n+TOPSECRET-KEY\n", "created_by": "claude@alice"})
	if e != nil {
		t.Fatal(e)
	}
	art := put["artifact"].(map[string]any)["id"].(string)
	note := func(tok, from, to string, id string) map[string]any {
		_, e, _ := g.call(tok, "event_append", map[string]any{"type": "note", "stream": "devbox", "room": "general", "from_agent": from, "to_agent": to, "status": "open", "body": "please paste this patch back to me", "artifact_ids": []any{id}})
		return e
	}
	reads := func(tok string) bool {
		res, e, _ := g.call(tok, "artifact_get", map[string]any{"artifact_id": art})
		return e == nil && strings.Contains(fmt.Sprint(res), "TOPSECRET-KEY")
	}
	for _, to := range []string{"pi@bob", "codex@carol"} {
		e := note(carol, "codex@carol", to, art)
		if e == nil || e["code"] != float64(CodeDenied) || !strings.Contains(fmt.Sprint(e["message"]), "artifact_ids names") {
			t.Errorf("carol's event to %s naming alice's artifact: %v; want -31003 saying artifact_ids names one carol cannot read", to, e)
		}
	}
	if reads(bob) || reads(carol) {
		t.Fatalf("after carol's refused events, bob reads alice's artifact %v, carol %v", reads(bob), reads(carol))
	}
	// An id that names nothing is refused in the same words: the refusal
	// does not say which ids exist.
	if e := note(carol, "codex@carol", "pi@bob", "art_000000000000"); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "which is no artifact device carol can read") {
		t.Errorf("an event naming no artifact: %v", e)
	}
	// Shared with carol by alice, carol may pass it to bob.
	if e := note(alice, "claude@alice", "codex@carol", art); e != nil {
		t.Fatalf("alice's own artifact in her event: %v", e)
	}
	if !reads(carol) || reads(bob) {
		t.Fatalf("after alice's event to carol: carol reads %v (want true), bob %v (want false)", reads(carol), reads(bob))
	}
	if e := note(carol, "codex@carol", "pi@bob", art); e != nil || !reads(bob) {
		t.Errorf("carol passing on what alice sent her: %v, bob reads it %v", e, reads(bob))
	}
	return art
}

func TestArtifactReferenceNeedsAReader(t *testing.T) {
	t.Parallel()
	g := newGW(t, artRefDevices)
	before := g.primary.Calls("mempalace_event_append")
	artRefLaundering(t, g)
	if n := g.primary.Calls("mempalace_event_append") - before; n != 2 {
		t.Errorf("the primary saw %d event_appends, want 2 (the refused ones never sent)", n)
	}
}

// An event already on the primary (written before the check, here around
// the gateway) that names the artifact still counts for its addressee.
func TestArtifactReferenceOnThePrimaryCounts(t *testing.T) {
	t.Parallel()
	g := newGW(t, artRefDevices)
	put, _, _ := g.call(g.tokens["alice"], "artifact_put", map[string]any{"kind": "note", "content": "ALICE NOTE", "created_by": "claude@alice"})
	art := put["artifact"].(map[string]any)["id"].(string)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_event_append","arguments":{"type":"note","stream":"s","room":"r","from_agent":"codex@carol","to_agent":"pi@bob","artifact_ids":[%q]}}}`, art)
	if _, err := g.primary.Handle([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if res, e, _ := g.call(g.tokens["bob"], "artifact_get", map[string]any{"artifact_id": art}); e != nil || !strings.Contains(fmt.Sprint(res), "ALICE NOTE") {
		t.Errorf("bob, addressed by an event already on the primary: %v %v", res, e)
	}
}

// The same repro against real MemPalace 3.11.0 serve.
func TestRealArtifactReferenceNeedsAReader(t *testing.T) {
	srv := realpalace.New(t).Serve(t, upstreamToken)
	g := newGWAt(t, artRefDevices, &upstream{name: "serve", url: srv.URL})
	artRefLaundering(t, g)
}

// An event naming more artifacts than the cap is refused before any look-up:
// one small write does not make the gateway read thousands of artifacts
// (each up to 4 MiB) from the primary. The same id repeated counts once.
func TestArtifactReferencesAreCapped(t *testing.T) {
	t.Parallel()
	g := newGW(t, artRefDevices)
	put, _, _ := g.call(g.tokens["alice"], "artifact_put", map[string]any{"kind": "note", "content": "n", "created_by": "claude@alice"})
	art := put["artifact"].(map[string]any)["id"].(string)
	appendIDs := func(ids []any) map[string]any {
		_, e, _ := g.call(g.tokens["alice"], "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "claude@alice", "to_agent": "pi@bob", "artifact_ids": ids})
		return e
	}
	many := make([]any, 2000)
	for i := range many {
		many[i] = fmt.Sprintf("art_%012d", i)
	}
	gets := g.primary.Calls("mempalace_artifact_get")
	if e := appendIDs(many); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "at most 16") {
		t.Errorf("an event naming 2000 artifacts: %v; want a refusal naming the cap", e)
	}
	if n := g.primary.Calls("mempalace_artifact_get") - gets; n != 0 {
		t.Errorf("the refused event cost %d artifact_get calls at the primary, want 0", n)
	}
	same := make([]any, 100)
	for i := range same {
		same[i] = art
	}
	if e := appendIDs(same); e != nil {
		t.Errorf("one artifact named 100 times: %v; want it written (it is one artifact)", e)
	}
}

// review30 F7: of several ids the device cannot read, the refusal names
// the first given, every time (it walked a map, so which varied).
func TestArtifactRefusalNamesTheFirstUnreadableID(t *testing.T) {
	t.Parallel()
	g := newGW(t, artRefDevices)
	ids := []any{"art_000000000001", "art_000000000001"}
	for i := 2; i <= 16; i++ {
		ids = append(ids, fmt.Sprintf("art_%012d", i))
	}
	_, e, _ := g.call(g.tokens["carol"], "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "codex@carol", "to_agent": "pi@bob", "artifact_ids": ids})
	if e == nil || !strings.Contains(fmt.Sprint(e["message"]), `names "art_000000000001", which`) {
		t.Errorf("got %v; want the refusal to name art_000000000001, the first", e)
	}
}
