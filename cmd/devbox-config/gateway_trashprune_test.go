package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/trash"
)

// Outside tester attack108 F1/F2: `gateway trash prune` answered "pruned
// 0" for deletes past the retention it had removed (opening the trash
// pruned them first), and `trash list` removed them unseen, so an
// operator listing the trash to save what was about to go lost it in that
// call. Now list shows them and prune counts what it removes.
func TestGatewayTrashPruneCountsWhatListStillShowed(t *testing.T) {
	cfg := emptyGatewayConfig(t)
	run := gatewayCLI(t, cfg)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keepOld := func(drawer string) {
		t.Helper()
		st, err := trash.Open(c.TrashPath(), c.TrashRetention(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		st.Now = func() time.Time { return time.Now().Add(-40 * 24 * time.Hour) }
		id, err := st.Keep(context.Background(), trash.Delete{Device: "ops-0001", Label: "ops", Tool: "delete_drawer", Drawers: []trash.Drawer{{ID: drawer, Wing: "shared", Room: "notes", Content: "the old runbook"}}})
		if err == nil {
			err = st.Settle(context.Background(), id, trash.StateDeleted, "", nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	keepOld("drawer_shared_notes_1")

	for range 2 {
		if out, _ := run(0, "trash", "list"); !strings.Contains(out, "drawer_shared_notes_1") || !strings.Contains(out, "deleted  (past the retention: the next prune, gateway start or delete removes it)") {
			t.Fatalf("trash list does not show a delete past the retention:\n%s", out)
		}
	}
	if out, _ := run(0, "trash", "prune"); !strings.Contains(out, "pruned 1 delete(s) older than 30 days") {
		t.Errorf("trash prune: %s", out)
	}
	if out, _ := run(0, "trash", "list"); strings.Contains(out, "drawer_shared_notes_1") {
		t.Errorf("trash list after the prune:\n%s", out)
	}

	// The gateway's start (its trash opened) prunes them.
	keepOld("drawer_shared_notes_2")
	srv := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:9/mcp", UpstreamToken: func() string { return "t" }, BindHost: "127.0.0.1"}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Trash(); err != nil { // as `gateway` opens it at its start
		t.Fatal(err)
	}
	srv.Close()
	if out, _ := run(0, "trash", "list"); strings.Contains(out, "drawer_shared_notes_2") {
		t.Errorf("trash list after the gateway's start:\n%s", out)
	}
}

// A delete dated ahead of this host's clock (a clock that ran ahead when
// it was made, then corrected) outlives the retention by that much:
// `trash list` says so, and until when it is kept (attack108 F3). Before,
// it was listed as any other. One a second ahead is not marked.
func TestGatewayTrashListMarksADeleteDatedAhead(t *testing.T) {
	cfg := emptyGatewayConfig(t)
	run := gatewayCLI(t, cfg)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := trash.Open(c.TrashPath(), c.TrashRetention(), nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(400 * 24 * time.Hour).Truncate(time.Second)
	for i, ahead := range []time.Time{at, time.Now().Add(time.Second)} {
		st.Now = func() time.Time { return ahead }
		if _, err := st.Keep(context.Background(), trash.Delete{Device: "ops-0001", Label: "ops", Tool: "delete_drawer", Drawers: []trash.Drawer{{ID: fmt.Sprint("drawer_shared_notes_", i), Wing: "shared", Room: "notes", Content: "a note"}}}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	out, _ := run(0, "trash", "list")
	want := "(dated ahead of this host's clock: kept until " + at.Add(30*24*time.Hour).UTC().Format(time.RFC3339) + "; `trash purge 1` removes its content now)"
	if !strings.Contains(out, want) || strings.Count(out, "dated ahead") != 1 {
		t.Errorf("trash list of a delete dated 400 days ahead and one a second ahead:\n%s\nwant the first, only, marked %s", out, want)
	}
	// Purged, it is not offered for a purge again (attack109 F5).
	run(0, "device", "add", "ops-0001", "--label", "ops", "--read", "*", "--write", "*", "--admin")
	run(0, "token", "issue", "ops-0001") // makes the secret a purge keys its digests with
	run(0, "trash", "purge", "1")
	if out, _ := run(0, "trash", "list"); !strings.Contains(out, "dated ahead") || strings.Contains(out, "`trash purge 1`") {
		t.Errorf("trash list after the purge:\n%s", out)
	}
}
