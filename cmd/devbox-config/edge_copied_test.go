package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// copiedOutbox makes the palace's outbox (edgeOutbox's, one op queued by
// device "dev") a copy of itself: its bytes in another file, renamed over
// it, as a copied HOME holds them.
func copiedOutbox(t *testing.T) string {
	t.Helper()
	s := edgeOutbox(t)
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"before the copy"}`)}); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".copy", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".copy", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The first command to open a copied outbox logs that it is one, whichever
// it is (attack54 N3: `edge status` and `edge flush` re-keyed it silently).
func TestACopiedOutboxIsLoggedByEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"edge", "status"}, {"edge", "flush", "--timeout", "1s"}, {"edge", "outbox", "list"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			copiedOutbox(t)
			_, _, errOut := runCLI(args...)
			if !strings.Contains(errOut, "level=WARN") || !strings.Contains(errOut, "this outbox is a copy of another") {
				t.Errorf("stderr:\n%s", errOut)
			}
		})
	}
}

// A copied HOME is a second machine writing under the first one's device
// id: edge status says so, with the commands that give it its own, while
// MEMPALACE_ORIGIN_DEVICE is still that id (attack54 N2: nothing said it).
func TestEdgeStatusSaysTheOutboxIsACopy(t *testing.T) {
	copiedOutbox(t)
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "dev")
	for range 2 { // the open that re-keys it, and the one after
		out := runOK(t, "edge", "status")
		for _, want := range []string{"COPY ", `writes under device "dev"'s name`, "first opened as a copy", "device add NEW-ID", "token issue NEW-ID", "MEMPALACE_ORIGIN_DEVICE=NEW-ID"} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
	}
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "laptop-2")
	if out := runOK(t, "edge", "status"); strings.Contains(out, "COPY") {
		t.Errorf("status of a copy given its own device id:\n%s", out)
	}
}

// `edge outbox same-machine` dismisses the COPY line of an outbox copied
// on this same machine (a backup restored in place), which the line's fix
// names, and refuses when there is no copy to dismiss: before, nothing
// could, and the note stayed while the device id was the same (attack57
// A3).
func TestSameMachineDismissesTheCopyLine(t *testing.T) {
	copiedOutbox(t)
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "dev")
	if out := runOK(t, "edge", "status"); !strings.Contains(out, "the same machine (a backup restored, a devbox moved to a new disk), nothing is wrong: `devbox-config edge outbox same-machine`") {
		t.Errorf("the COPY line names no way to dismiss it:\n%s", out)
	}
	if out := runOK(t, "edge", "outbox", "same-machine"); !strings.Contains(out, "recorded as this machine's own") || !strings.Contains(out, `in fact a second machine, it writes under device "dev"'s name`) {
		t.Errorf("same-machine said:\n%s", out)
	}
	if out := runOK(t, "edge", "status"); strings.Contains(out, "COPY") {
		t.Errorf("status after same-machine:\n%s", out)
	}
	code, out, errOut := runCLI("edge", "outbox", "same-machine")
	if code != 1 || !strings.Contains(errOut, "no record of being a copy") {
		t.Errorf("same-machine with no copy: exit %d\n%s%s", code, out, errOut)
	}
}

// same-machine beside a locked outbox says so as retry, drop and
// delivered do, with the file and what to do, not SQLite's words alone.
func TestSameMachineBesideALockedOutboxSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out SQLite's 10 s busy timeout: the integration tier")
	}
	path := copiedOutbox(t)
	runOK(t, "edge", "status") // the open that notes the copy
	holder := lockedOutbox(t, path, false)
	defer holder.ExecContext(context.Background(), "ROLLBACK") // the lock ends here
	code, out, errOut := runCLI("edge", "outbox", "same-machine")
	if all := out + errOut; code != 1 || !strings.Contains(all, path) || !strings.Contains(all, "another devbox-config process") || !strings.Contains(all, "try again in a moment") {
		t.Errorf("edge outbox same-machine beside a locked outbox: exit %d\n%s", code, all)
	}
}
