package edge

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// A local palace whose SQLite failed MemPalace's integrity check: MemPalace
// refuses every call on it with -32002 until it is repaired, before the
// tool runs. A write the policy replicates is queued for the primary, as
// for a local palace that is down, and the answer says the local palace
// does not have it and why; a merged read answers from the primary,
// degraded. Before, the agent got -32002 and the write went nowhere (an
// outside tester, attack13 05).
func TestADamagedLocalPalaceQueuesWritesAndReadsThePrimary(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{childEnv: []string{"FAKEPALACE_DAMAGED=1"}})
	const content = "the deploy key rotates on mondays"
	m, res := h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
	if res.IsError || m["queued"] != true || !strings.Contains(fmt.Sprint(m["message"]), "repaired") {
		t.Fatalf("add_drawer on a damaged local palace: %v", m)
	}
	h.eventually("the write on the primary", func() bool {
		page := h.onPrimary("list_drawers", map[string]any{"wing": "shared"})
		return strings.Contains(fmt.Sprint(page), "drawer_shared_ops_")
	})
	s, res := h.call("search", map[string]any{"query": "deploy key"})
	if res.IsError || !strings.Contains(fmt.Sprint(s), content) || s["degraded"] != true {
		t.Errorf("search on a damaged local palace: %v", s)
	}
}

// The same against real MemPalace 3.11.0: 4 KiB of the local palace's
// chroma.sqlite3 overwritten (disk damage), real serve the primary.
func TestRealADamagedLocalPalaceQueuesWrites(t *testing.T) {
	local := realpalace.New(t)
	s := local.Stdio(t, local.MCPCommand()...)
	s.Seed(t, realpalace.Drawer("shared", "r", "a drawer the palace held before the damage"))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(local.Dir, "chroma.sqlite3"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(bytes.Repeat([]byte{0xA5, 0x3C, 0x7E, 0x11}, 1024), 1024)
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, testToken)
	h := start(t, harnessOpts{realLocal: local, primaryURL: srv.URL, timeout: 30 * time.Second})
	const content = "filed while the local palace was damaged"
	m, res := h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
	if res.IsError || m["queued"] != true || !strings.Contains(fmt.Sprint(m["message"]), "repaired") {
		t.Fatalf("add_drawer on a damaged real palace: %v", m)
	}
	waitFor(t, 60*time.Second, "the write on real serve", func() bool {
		page := srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "shared"})
		return page["count"] == 1.0
	})
}

// On a damaged local palace an admin device adds a drawer (queued for the
// primary) and deletes it: the delete goes to the primary the same way
// (queued, the answer says the local palace refused it), so the primary
// does not keep the drawer. Before, the delete answered -32002 and was
// not queued: the add landed on the primary and stayed there (an outside
// tester, attack14 07).
func TestADamagedLocalPalaceQueuesDeletes(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "ops-0001", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Agents: []string{"opencode@edge-test"}})
	h := start(t, harnessOpts{primaryURL: url, token: tokens["ops-0001"], childEnv: []string{"FAKEPALACE_DAMAGED=1"}})
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.Admin })
	const content = "damaged: the build cache lives on the nfs share"
	m, _ := h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
	if m["queued"] != true {
		t.Fatalf("add_drawer on a damaged local palace: %v", m)
	}
	id := catalogue.DrawerID("shared", "ops", content)
	d, res := h.call("delete_drawer", map[string]any{"drawer_id": id})
	if res.IsError || !strings.Contains(fmt.Sprint(d), "queued") || !strings.Contains(fmt.Sprint(d), "repaired") {
		t.Errorf("delete_drawer on a damaged local palace: %s, want it queued for the primary, saying the local palace refused it", mustJSON(d))
	}
	h.drained()
	if _, held := primary.Dump().Drawers[id]; held {
		t.Error("the primary keeps the drawer added and deleted on a damaged local palace")
	}
}
