package gateway

import (
	"fmt"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// startFakeAt is the double playing release version.
func startFakeAt(t testing.TB, version string) *upstream {
	t.Helper()
	pl, up := testbed.Primary(t, fakepalace.Options{Version: version}, fakepalace.HTTPOptions{Token: upstreamToken})
	return &upstream{name: "fakepalace " + version, url: up.URL(), palace: pl}
}

// TestObjectChecksReadALongLog: the event an ack or an artifact_get's
// check needs is old, with more than a page (500) of later events
// addressed to the device and written by it. From 3.10.0 event_list lists
// newest first without a cursor, and from 3.11.0 from_agent no longer
// filters (writer does): the look-up must still reach the old event, on
// every release. Before, it paged with since_event_id from the newest
// page's last (oldest) event, reading the newest page over and over, and
// the laptop was denied an ack of an event addressed to it.
func TestObjectChecksReadALongLog(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"3.9.0", "3.10.0", "3.11.0"} {
		t.Run(version, func(t *testing.T) {
			u := startFakeAt(t, version)
			g := newGWAt(t, devices, u)
			laptop := g.tokens["laptop-7f3a"]
			up := g.primary
			event := func(args map[string]any) string {
				t.Helper()
				b := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_event_append","arguments":%s}}`, encodeJSON(args))
				out, err := up.Handle([]byte(b))
				if err != nil {
					t.Fatal(err)
				}
				return gjson.Get(gjson.GetBytes(out, "result.content.0.text").String(), "event.id").String()
			}
			toLaptop := event(map[string]any{"type": "ask", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": "opencode@laptop", "body": "old ask"})
			byLaptop := event(map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "opencode@laptop", "to_agent": "pi@desk", "body": "old note"})
			put, _, _ := g.call(g.tokens["desk-9b21"], "patch_submit", map[string]any{"content": "diff\n", "from_agent": "pi@desk", "stream": "s", "to_agent": "opencode@laptop"})
			art := put["artifact"].(map[string]any)["id"].(string)
			for i := range 1100 {
				from, to := "pi@desk", "opencode@laptop"
				if i%2 == 1 {
					from, to = to, "*"
				}
				event(map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": from, "to_agent": to, "body": fmt.Sprint("later ", i)})
			}
			for name, id := range map[string]string{"addressed to the laptop": toLaptop, "written by the laptop": byLaptop} {
				if _, rpc, _ := g.call(laptop, "event_ack", map[string]any{"event_id": id, "from_agent": "opencode@laptop", "status": "applied"}); rpc != nil {
					t.Errorf("event_ack of an old event %s: %v", name, rpc)
				}
			}
			if res, rpc, _ := g.call(laptop, "artifact_get", map[string]any{"artifact_id": art}); rpc != nil || res["artifact"] == nil {
				t.Errorf("artifact_get of an artifact an old event to the laptop refers to: %v %v", res, rpc)
			}
		})
	}
}
