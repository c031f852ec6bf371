package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// Outside tester attack83 F6: a removed device's writes queued by an
// edge from before ops recorded the device (9afaa28, f0f9e9f), the devbox
// then upgraded and given another device's token, are held as any
// other-device op is (operator.md, Devices and tokens): `edge flush`
// sends only the op that names no device, and `edge status`, `edge
// outbox list` and doctor name the device they were queued as, with drop
// and retry. (It failed before: `edge flush` sent them as wide-01.)
func TestAnOlderEdgesQueuedWritesAreNotSentUnderTheNextToken(t *testing.T) {
	d := newRemovedDevice(t, "tmp-0042")
	path := d.s.Path()
	d.s.Close()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	fixture, err := os.ReadFile(filepath.Join("..", "..", "edge", "outbox", "testdata", "outbox-9afaa28.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlitewal.Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(string(fixture) + `;UPDATE ops SET origin_device='tmp-0042', origin_label='tmpbox' WHERE origin_device='devF'`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	d.gw(0, "device", "remove", "tmp-0042")
	d.srv.Reload()
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok) // the upgraded devbox's new .env
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "wide-01")

	code, flushed, errb := runCLI("edge", "flush")
	if d.landed("F drawer two after removal") || d.landed("F drawer three after removal") {
		t.Fatalf("the removed device's queued writes were sent as wide-01 (exit %d):\n%s%s", code, flushed, errb)
	}
	if code != 1 || !d.landed("a drawer queued with no origin device") || !strings.Contains(flushed, "sent 1") || !strings.Contains(flushed, "dead 2") || !strings.Contains(flushed, "sends it as wide-01") {
		t.Errorf("flush: exit %d\n%s%s", code, flushed, errb)
	}
	if d.s, err = openAsEdge(path, "wide-01"); err != nil { // closed by newRemovedDevice's cleanup
		t.Fatal(err)
	}
	dead, _ := d.s.List(context.Background(), 10, outbox.Dead)
	if len(dead) != 2 {
		t.Fatalf("held: %+v", dead)
	}
	id := dead[0].Short()
	_, status, _ := runCLI("edge", "status")
	_, list, _ := runCLI("edge", "outbox", "list")
	for _, want := range []string{"DEAD       " + id, "queued as device tmp-0042; the gateway names this token wide-01: not sent", "edge outbox drop " + id, "edge outbox retry " + id + "` sends it as wide-01"} {
		if !strings.Contains(status, want) {
			t.Errorf("edge status lacks %q:\n%s", want, status)
		}
	}
	for _, want := range []string{id, "drop it", "retry it", "other-device: queued as device tmp-0042"} {
		if !strings.Contains(list, want) {
			t.Errorf("edge outbox list lacks %q:\n%s", want, list)
		}
	}
	var out, errOut strings.Builder
	run([]string{"doctor", "--home", d.home, "--json"}, &out, &errOut)
	var doc struct {
		Findings []struct{ ID, Severity, Message, Fix string }
	}
	if err := json.Unmarshal([]byte(out.String()), &doc); err != nil {
		t.Fatalf("doctor --json: %v\n%s%s", err, out.String(), errOut.String())
	}
	found := false
	for _, f := range doc.Findings {
		if f.ID == "device-identity" && f.Severity == "error" {
			found = strings.Contains(f.Message, "2 write(s)") && strings.Contains(f.Message, "queued as device tmp-0042") && strings.Contains(f.Fix, "edge outbox drop")
		}
	}
	if !found {
		t.Errorf("doctor's device-identity does not name the 2 writes queued as tmp-0042:\n%s", out.String())
	}
}
