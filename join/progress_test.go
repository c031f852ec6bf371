package join

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
)

// attack48 Part 1: the sending phase counts a record the gateway refused
// as settled, as it counts one sent: its last line says every record is
// settled (it stayed at the sent ones, "1/2300 records, 0/s", and the ETA
// climbed to 62 h while the refused ones were settled).
func TestJoinProgressCountsRefusedRecordsSettled(t *testing.T) {
	t.Parallel()
	pr, url, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project"}, KG: "write", Agents: []string{"opencode@desk"}}})
	p := newPalace(t)
	for i := range 6 {
		p.do(t, "add_drawer", map[string]any{"wing": []string{"project", "notes"}[i%2], "room": "r", "content": fmt.Sprintf("note %d", i)})
	}
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	var b testbed.SyncBuffer
	rep := run(t, c, Options{Progress: &Progress{W: &b, Every: time.Nanosecond}})
	if len(rep.Failed) == 0 {
		t.Fatalf("the gateway refused nothing: %+v", rep)
	}
	var last string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "join: sending: ") {
			last = l
		}
	}
	var done, total int
	if _, err := fmt.Sscanf(strings.TrimPrefix(last, "join: sending: "), "%d/%d", &done, &total); err != nil || done != total {
		t.Fatalf("the sending phase's last line is %q, want every record settled; progress:\n%s", last, b.String())
	}
}
