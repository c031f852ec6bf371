package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// attack74 F5: a diary_write whose first send reached the primary and
// whose answer the gateway lost (or the gateway died forwarding it), the
// op held in doubt, with the primary's clock stepped back behind the
// edge's fence (MemPalace restarted in another TZ, an NTP step): the
// entry is stamped older than the fence, the edge's count says "not
// there" and sends it again on its look-up's word. The gateway compares
// the room with what the first send noted before it was sent: one drawer
// more and no newer entry, so something was filed with an older stamp,
// and it keeps the op in doubt (-32031, saying why) instead of filing the
// entry twice. Before, the resend was forwarded: two entries. An
// operator's retry still sends it.
func TestAResendAfterThePrimarysClockSteppedBackStaysInDoubt(t *testing.T) {
	t.Parallel()
	d := newDiaryClock(t)
	const text = "K37 clock stepped back, answer lost"
	d.write(t, op('a'), "standup: nothing new", "") // the edge's fence: an entry on the right clock
	d.back.Store(int64(12 * time.Hour))
	d.proxy.Drop("mempalace_diary_write")
	if status, m := d.write(t, op('b'), text, ""); status == http.StatusOK {
		t.Fatalf("a diary write whose answer was lost, stamped in the past: %d %v, want it lost", status, m)
	}
	d.file(t, map[string]any{"name": "mempalace_add_drawer", "arguments": map[string]any{"wing": "wing_pi", "room": "diary", "content": "a note, not an entry"}})
	for _, resend := range []string{"", "looked-up"} {
		status, m := d.write(t, op('b'), text, resend)
		if code := gjson.GetBytes(encodeJSON(m), "error.code").Int(); status != http.StatusOK || code != ledger.CodeInDoubt {
			t.Fatalf("its resend (%q): %d %v, want -32031 in doubt", resend, status, m)
		}
		if msg := gjson.GetBytes(encodeJSON(m), "error.message").Str; resend != "" && !strings.Contains(msg, "clock may have stepped back") {
			t.Fatalf("the looked-up resend's refusal does not say why: %q", msg)
		}
		if n := d.entries(text); n != 1 {
			t.Fatalf("after the resend (%q), the primary holds the entry %d times, want once", resend, n)
		}
	}
	if status, m := d.write(t, op('b'), text, "operator"); status != http.StatusOK || gjson.GetBytes(encodeJSON(m), "error").Exists() {
		t.Fatalf("the operator's retry: %d %v, want it sent", status, m)
	}
}

// The control: the primary's clock is right, the op's first send never
// reached it, and another writer filed an entry in the room around the
// gateway meanwhile (so the gateway's own settling keeps the op in
// doubt). Every drawer filed since is newer than the room's newest entry
// then, none with the op's text: the edge's look-up's resend is
// forwarded, as before, and the entry is filed once.
func TestAResendAfterADiaryWriteThatNeverLandedIsForwarded(t *testing.T) {
	t.Parallel()
	d := newDiaryClock(t)
	const text = "K38 clock fine, never landed"
	d.write(t, op('a'), "standup: nothing new", "")
	d.cutNext.Store(true) // cut before the primary gets it; another writer files meanwhile
	if status, m := d.write(t, op('b'), text, ""); status == http.StatusOK || status == http.StatusServiceUnavailable {
		t.Fatalf("a diary write cut, with another entry filed meanwhile: %d %v, want it lost (in doubt)", status, m)
	}
	status, m := d.write(t, op('b'), text, "looked-up")
	if status != http.StatusOK || gjson.GetBytes(encodeJSON(m), "error").Exists() {
		t.Fatalf("its looked-up resend: %d %v, want it forwarded", status, m)
	}
	if n := d.entries(text); n != 1 {
		t.Fatalf("the primary holds the entry %d times, want once", n)
	}
}

// review25 finding 2: the same, but what is filed in the room meanwhile
// is not an entry (add_drawer with room "diary"; a diary ingest files
// such drawers too). Before, the room's growth counted it and the resend
// was held in doubt, blaming a clock that was right.
func TestAResendIsForwardedAfterAnotherDrawerWasFiledInTheDiaryRoom(t *testing.T) {
	t.Parallel()
	d := newDiaryClock(t)
	const text = "K39 clock fine, never landed, a note filed meanwhile"
	d.write(t, op('a'), "standup: nothing new", "")
	d.meanwhile = map[string]any{"name": "mempalace_add_drawer", "arguments": map[string]any{"wing": "wing_pi", "room": "diary", "content": "a note filed in the diary room"}}
	d.cutNext.Store(true)
	if status, m := d.write(t, op('b'), text, ""); status == http.StatusOK || status == http.StatusServiceUnavailable {
		t.Fatalf("a diary write cut, with a drawer filed meanwhile: %d %v, want it lost (in doubt)", status, m)
	}
	status, m := d.write(t, op('b'), text, "looked-up")
	if status != http.StatusOK || gjson.GetBytes(encodeJSON(m), "error").Exists() {
		t.Fatalf("its looked-up resend: %d %v, want it forwarded", status, m)
	}
	if n := d.entries(text); n != 1 {
		t.Fatalf("the primary holds the entry %d times, want once", n)
	}
}

// attack76 F5: the same stepped-back clock, but the gateway's read of
// the diary room before the first send failed (the connection closed: a
// primary restarting), so that send noted no room to compare a resend
// with. Before, the looked-up resend was forwarded on the edge's word:
// two entries. Now the first send notes that the room was not read, and
// the resend stays in doubt (-32031, saying so); the operator's retry
// still sends it.
func TestAResendWhoseRoomWasNotReadBeforeItsFirstSendStaysInDoubt(t *testing.T) {
	t.Parallel()
	d := newDiaryClock(t)
	const text = "K40 room not read, clock stepped back, answer lost"
	var logged testbed.SyncBuffer
	d.g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	d.write(t, op('a'), "standup: nothing new", "")
	d.back.Store(int64(12 * time.Hour))
	d.failLists.Store(2) // a read is replayed once on a closed connection
	d.proxy.Drop("mempalace_diary_write")
	if status, m := d.write(t, op('b'), text, ""); status == http.StatusOK {
		t.Fatalf("a diary write whose answer was lost: %d %v, want it lost", status, m)
	}
	status, m := d.write(t, op('b'), text, "looked-up")
	if code := gjson.GetBytes(encodeJSON(m), "error.code").Int(); status != http.StatusOK || code != ledger.CodeInDoubt {
		t.Fatalf("its looked-up resend: %d %v, want -32031 in doubt", status, m)
	}
	if msg := gjson.GetBytes(encodeJSON(m), "error.message").Str; !strings.Contains(msg, "could not be read before") {
		t.Fatalf("the refusal does not say why: %q", msg)
	}
	if n := d.entries(text); n != 1 {
		t.Fatalf("the primary holds the entry %d times, want once", n)
	}
	if !strings.Contains(logged.String(), "kept in doubt, not forwarded") { // attack76 F6
		t.Fatalf("the gateway log does not say the resend was kept in doubt:\n%s", logged.String())
	}
	if status, m := d.write(t, op('b'), text, "operator"); status != http.StatusOK || gjson.GetBytes(encodeJSON(m), "error").Exists() {
		t.Fatalf("the operator's retry: %d %v, want it sent", status, m)
	}
}

// diaryClock is a gateway with a ledger in front of a fake primary whose
// clock can step back, through a proxy that loses answers (proxy.Drop)
// or, once cutNext is set, cuts the next diary write before the primary
// gets it and files another writer's entry (or the call meanwhile names)
// around the gateway.
type diaryClock struct {
	g         *gw
	proxy     *realpalace.Proxy
	fake      *fakepalace.Palace
	back      atomic.Int64 // how far the primary's clock is behind
	cutNext   atomic.Bool
	failLists atomic.Int32   // how many list_drawers calls to cut next
	meanwhile map[string]any // a tools/call's params; set before cutNext
}

func newDiaryClock(t *testing.T) *diaryClock {
	d := &diaryClock{meanwhile: map[string]any{"name": "mempalace_diary_write", "arguments": map[string]any{"agent_name": "pi", "entry": "another writer, around the gateway"}}}
	pl, up := testbed.Primary(t, fakepalace.Options{Now: func() time.Time { return time.Now().Add(-time.Duration(d.back.Load())) }}, fakepalace.HTTPOptions{Token: upstreamToken})
	d.fake, d.proxy = pl, realpalace.NewProxy(t, up.URL())
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		name := gjson.GetBytes(body, "params.name").Str
		cutList := name == "mempalace_list_drawers" && d.failLists.Add(-1) >= 0
		if cutList || name == "mempalace_diary_write" && d.cutNext.CompareAndSwap(true, false) {
			if !cutList {
				d.file(t, d.meanwhile)
			}
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		d.proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	d.g = newGWAt(t, []Device{{ID: "ops", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, Agents: []string{"pi@ops"}}},
		&upstream{name: "a cutting proxy", url: front.URL + "/mcp"})
	d.g.withLedger()
	return d
}

// write sends a diary_write of text under opID, with resend as its
// params._meta[ResendKey] ("" for none).
func (d *diaryClock) write(t *testing.T, opID, text, resend string) (int, map[string]any) {
	t.Helper()
	meta := map[string]any{ledger.MetaKey: opID}
	if resend != "" {
		meta[ledger.ResendKey] = resend
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": "mempalace_diary_write", "arguments": map[string]any{"agent_name": "pi", "entry": text}, "_meta": meta}})
	return d.g.post(d.g.tokens["ops"], string(b))
}

// file makes a tools/call (params) on the primary around the gateway.
func (d *diaryClock) file(t *testing.T, params map[string]any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	if _, err := d.fake.Handle(b); err != nil {
		t.Error(err)
	}
}

// entries is how many diary entries on the primary hold text.
func (d *diaryClock) entries(text string) int {
	n := 0
	for _, dr := range d.fake.Dump().Drawers {
		if dr.Diary && dr.Content == text {
			n++
		}
	}
	return n
}

func op(c byte) string { return strings.Repeat(string(c), 64) }

// A note kept by the gateway before the room's tail was noted ("total
// newest") is read with the tail unknown, so the resend compares totals
// as that gateway did; a room with no entry is noted with an empty stamp.
func TestADiaryRoomNoteOfEitherFormIsRead(t *testing.T) {
	for note, want := range map[string]roomSeen{
		"7 20261206_230112000000":   {total: 7, tail: -1, newest: "20261206_230112000000"},
		"7 ":                        {total: 7, tail: -1},
		"9 2 20261206_230112000000": {total: 9, tail: 2, newest: "20261206_230112000000"},
		"3 3 ":                      {total: 3, tail: 3},
		"3 x 20261206_230112000000": {total: 3, tail: -1, newest: "20261206_230112000000"},
		"":                          {tail: -1},
		(roomSeen{total: 4, tail: 1, newest: "20261206_230112000000"}).note(): {total: 4, tail: 1, newest: "20261206_230112000000"},
	} {
		if got := parseRoomSeen(note); got != want {
			t.Errorf("parseRoomSeen(%q) = %+v, want %+v", note, got, want)
		}
	}
}
