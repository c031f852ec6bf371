package edge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
)

// attack100 F3: a checkpoint a gateway refuses for its batch cap (-31003,
// rule batch_cap: more than 2 MiB of content in one call, "send them as
// smaller checkpoints") is dead at its first refusal, as operator.md
// says: the same checkpoint is refused every time, whatever is granted.
// Before, it was sent (2 MB each time) five times before it was dead.
func TestACheckpointOverTheGatewaysBatchCapIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	url, tokens := testGateway(t, srv.URL(), gateway.Device{ID: "dev2", Label: "dev2", Read: []string{"*"}, Write: []string{"*"}})
	h := start(t, harnessOpts{primaryURL: url, token: tokens["dev2"]})
	var items []any
	for i := range 11 {
		items = append(items, map[string]any{"wing": "caps", "room": "big", "content": fmt.Sprintf("%d %s", i, strings.Repeat("é", 99_990))})
	}
	h.call("checkpoint", map[string]any{"items": items})
	var dead []string
	h.eventually("the checkpoint dead", func() bool {
		ops := h.deadOps()
		dead = dead[:0]
		for _, o := range ops {
			dead = append(dead, fmt.Sprintf("%s after %d tries: %s", o.Tool, o.Attempts, o.Error))
		}
		return len(ops) == 1
	})
	if ops := h.deadOps(); ops[0].Attempts != 1 || !strings.Contains(string(ops[0].Error), "smaller checkpoints") {
		t.Errorf("dead: %v; want the checkpoint dead at its first refusal, in the gateway's words", dead)
	}
}
