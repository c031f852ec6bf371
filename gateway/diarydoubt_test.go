package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// Two palaces share device ops (its token; their op ids never collide).
// The other palace's "standup: nothing new" is on the primary when this
// one writes the same text and the gateway loses the upstream's answer:
// cut before the upstream got the request, the gateway answers "not
// applied" and forwards the op's resend (found by an attacker pass: the
// op was held in doubt, and the edge's diary look-up took the other
// palace's entry for its own, so the primary had one entry for two
// writes, and a later delete of this palace's entry deleted the other's);
// cut after the upstream made it, the gateway answers with the entry it
// made, and the resend gets that answer again.
func TestDiaryWriteWhoseUpstreamAnswerWasLostIsSettledByTheGateway(t *testing.T) {
	t.Parallel()
	fake := startFake(t)
	diaryLostAnswer(t, fake.url, "mempalace_diary_write", fakeEntries(fake))
}

// A checkpoint carrying a diary entry, the same way: its answer lost after
// the upstream filed its items and its entry, the gateway answers with the
// entry it made, and the resend gets that answer, not a second entry (it
// held the op in doubt, and the edge's count decided).
func TestCheckpointWhoseUpstreamAnswerWasLostIsSettledByTheGateway(t *testing.T) {
	t.Parallel()
	fake := startFake(t)
	diaryLostAnswer(t, fake.url, "mempalace_checkpoint", fakeEntries(fake))
}

// fakeEntries is the ids of the fake's drawers holding a text.
func fakeEntries(fake *upstream) func(text string) map[string]bool {
	return func(text string) map[string]bool {
		ids := map[string]bool{}
		for _, d := range fake.palace.Dump().Drawers {
			if d.Content == text {
				ids[d.ID] = true
			}
		}
		return ids
	}
}

// diaryLostAnswer is the tests above against the upstream at url, for
// tool (mempalace_diary_write, or mempalace_checkpoint with one item and
// the entry as its diary); entries is the ids of the entries with the
// text there.
func diaryLostAnswer(t *testing.T, url, tool string, entries func(text string) map[string]bool) {
	proxy := realpalace.NewProxy(t, url) // Drop: the answer lost after the fake made the write
	var cutBefore atomic.Bool            // the next write cut before the fake gets it
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if gjson.GetBytes(body, "params.name").Str == tool && cutBefore.CompareAndSwap(true, false) {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	g := newGWAt(t, []Device{{ID: "ops", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, Agents: []string{"pi@ops"}}},
		&upstream{name: "a cutting proxy", url: front.URL + "/mcp"})
	g.withLedger()
	tok := g.tokens["ops"]
	const text = "standup: nothing new"
	entry, idAt := map[string]any{"agent_name": "pi", "entry": text}, "entry_id"
	if tool == "mempalace_checkpoint" {
		item := map[string]any{"wing": "notes", "room": "standups", "content": "the standup was short"}
		entry, idAt = map[string]any{"items": []any{item}, "diary": entry}, "diary.entry_id"
	}
	op := func(n byte) string { return string(bytes.Repeat([]byte{'a' + n}, 64)) }
	onPrimary := func() map[string]bool { return entries(text) }
	write := func(opID string) (int, string, map[string]any) {
		t.Helper()
		status, m := g.postOp(tok, tool, entry, opID)
		res := gjson.GetBytes(encodeJSON(m), "result.content.0.text").Str
		return status, gjson.Get(res, idAt).Str, m
	}

	// The other palace's entry.
	if status, id, m := write(op(0)); status != 200 || id == "" {
		t.Fatalf("the other palace's write: %d %v", status, m)
	}

	// Cut before the upstream got it: not applied, and the resend is forwarded.
	cutBefore.Store(true)
	status, _, m := write(op(1))
	if status == 200 || status == http.StatusBadGateway || m["error"] != nil && gjson.GetBytes(encodeJSON(m), "error.code").Int() == -32031 {
		t.Fatalf("a diary write cut before the upstream got it: %d %v, want an answer that it was not applied", status, m)
	}
	status, id1, m := write(op(1))
	if status != 200 || id1 == "" {
		t.Fatalf("its resend: %d %v, want it forwarded", status, m)
	}
	if got := onPrimary(); len(got) != 2 || !got[id1] {
		t.Fatalf("after two writes of the text, the primary holds %v (the resend answered %s)", got, id1)
	}

	// Cut after the upstream made it: the gateway names the entry it made.
	proxy.Drop(tool)
	before := onPrimary()
	status, id2, m := write(op(2))
	if status != 200 || id2 == "" || before[id2] {
		t.Fatalf("a diary write whose answer was lost after it was made: %d %v, want its own new entry (not one of %v)", status, m, before)
	}
	if got := onPrimary(); len(got) != 3 || !got[id2] {
		t.Fatalf("after three writes of the text, the primary holds %v (the answer named %s)", got, id2)
	}
	status, again, m := write(op(2))
	if status != 200 || again != id2 || !gjson.GetBytes(encodeJSON(m), `result._meta.devbox-config/replayed`).Bool() {
		t.Fatalf("its resend: %d %v, want the recorded answer naming %s", status, m, id2)
	}
	if lost := proxy.Lost(); len(lost) != 1 {
		t.Fatalf("answers lost: %v", lost)
	}
	if got := onPrimary(); len(got) != 3 {
		t.Fatalf("the primary holds %d entries of three writes", len(got))
	}
}

// firstDiaryLostAnswer is TestRealFirstDiaryWriteToAnEmptyPrimaryWhoseAnswerWasLost against the empty upstream at
// url, the answer cut before or after the upstream got the write.
func firstDiaryLostAnswer(t *testing.T, url, cut string, entries func(text string) map[string]bool) {
	proxy := realpalace.NewProxy(t, url)
	var cutBefore atomic.Bool
	cutBefore.Store(cut == "before")
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if gjson.GetBytes(body, "params.name").Str == "mempalace_diary_write" && cutBefore.CompareAndSwap(true, false) {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	if cut == "after" {
		proxy.Drop("mempalace_diary_write")
	}
	g := newGWAt(t, []Device{{ID: "ops", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, Agents: []string{"pi@ops"}}},
		&upstream{name: "a cutting proxy", url: front.URL + "/mcp"})
	g.withLedger()
	const text = "the first entry on a new primary"
	opID := string(bytes.Repeat([]byte{'f'}, 64))
	status, m := g.postOp(g.tokens["ops"], "mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": text}, opID)
	id := gjson.Get(gjson.GetBytes(encodeJSON(m), "result.content.0.text").Str, "entry_id").Str
	if cut == "before" {
		if status == 200 || status == http.StatusBadGateway {
			t.Fatalf("a first diary write cut before the upstream got it: %d %v, want an answer that it was not applied", status, m)
		}
		status, m = g.postOp(g.tokens["ops"], "mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": text}, opID)
		id = gjson.Get(gjson.GetBytes(encodeJSON(m), "result.content.0.text").Str, "entry_id").Str
	}
	if status != 200 || id == "" {
		t.Fatalf("a first diary write whose answer was lost %s the upstream got it: %d %v, want the entry it made", cut, status, m)
	}
	if got := entries(text); len(got) != 1 || !got[id] {
		t.Fatalf("the primary holds %v, the answer named %s", got, id)
	}
}

// A fleet's first write to a primary that holds nothing yet, a diary
// entry whose upstream answer the gateway loses: real MemPalace answers
// the look-ups around it (list_drawers) with "Chroma database missing"
// while no drawer exists (the double answers an empty list: a recorded
// difference), which means nothing is there. Cut after the upstream made
// it, the gateway answers with the entry it made; cut before, "not
// applied", and the resend is forwarded. Before, both were held in doubt
// until an operator settled them.
func TestRealFirstDiaryWriteToAnEmptyPrimaryWhoseAnswerWasLost(t *testing.T) {
	for _, cut := range []string{"after", "before"} {
		t.Run(cut, func(t *testing.T) {
			srv := realpalace.New(t).Serve(t, upstreamToken)
			firstDiaryLostAnswer(t, srv.URL, cut, realEntries(t, srv))
		})
	}
}
