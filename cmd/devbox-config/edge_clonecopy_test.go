package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Outside tester attack74 F7: a devbox's HOME copied to a second machine
// and given its own device id and token before its first edge command
// (docs/operator.md, A cloned devbox). The write queued before the copy is
// the original's to send: flush, edge status, outbox list and doctor say
// so and offer `drop`, or `retry --force` if the original is gone for
// good, and `edge outbox retry` refuses it without --force (it failed
// before: every one offered `retry ID` "sends it as wide-01", and the
// retried op was filed twice, once per device). A write
// the copy made under the old id before its rename is this machine's: it
// is offered `retry`, and sent.
func TestACopiedOutboxGivenItsOwnDeviceDropsWritesQueuedBeforeTheCopy(t *testing.T) {
	d := newRemovedDevice(t, "tmp-0042") // tmp-0042 the original, wide-01 the copy's own device
	d.write("the original's first write")
	if code, out, errb := runCLI("edge", "flush"); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errb) // the edge hears the gateway name the token tmp-0042
	}
	d.write("queued before the devbox was copied")
	path := d.s.Path()
	d.s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".copy", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".copy", path); err != nil { // the copied HOME's outbox: another inode
		t.Fatal(err)
	}
	// The copy runs a while under the old id before it is renamed.
	if d.s, err = openAsEdge(path, "tmp-0042"); err != nil {
		t.Fatal(err)
	}
	d.write("written on the copy before its rename")
	d.s.Close()
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "wide-01")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok)

	flushed := clonedFlush(t, d)
	before, after := heldOp(t, path, "queued before"), heldOp(t, path, "written on the copy")
	// The original may be retired (a devbox moved to new hardware): every
	// text that says drop names --force for that case (review25 F3).
	gone := "if the original machine is gone for good and never sent it: `devbox-config edge outbox retry --force " + before.Short() + "`"
	status := runOK(t, "edge", "status")
	list := runOK(t, "edge", "outbox", "list")
	if !strings.Contains(flushed, "not sent: "+before.Short()+" mempalace_add_drawer (dead): ") {
		t.Errorf("flush:\n%s", flushed)
	}
	for _, want := range []string{"queued before this outbox was copied: the original machine holds it too", "`devbox-config edge outbox drop " + before.Short() + "`", gone,
		"written on this machine after its outbox was copied", "`devbox-config edge outbox retry " + after.Short() + "` sends it as wide-01"} {
		for name, text := range map[string]string{"flush": flushed, "edge status": status} {
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, text)
			}
		}
	}
	for _, text := range []string{flushed, status, list} {
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, before.Short()) && strings.Contains(line, "retry "+before.Short()) {
				t.Errorf("a write queued before the copy is offered a retry:\n%s", line)
			}
		}
	}
	if !strings.Contains(status, "DEAD       "+before.Short()) {
		t.Errorf("edge status:\n%s", status)
	}
	if !strings.Contains(list, "dead (queued before this outbox was copied: the original sends it; drop it, or if the original is gone for good and never sent it: retry --force)") || !strings.Contains(list, "dead (written here after the copy: retry sends it as this device)") {
		t.Errorf("edge outbox list:\n%s", list)
	}
	if f := deviceIdentity(t, d.home); f.Severity != "error" || !strings.Contains(f.Fix, "1 were queued before this outbox was copied: `devbox-config edge outbox drop ID` those") || !strings.Contains(f.Fix, "if the original machine is gone for good and never sent them: `devbox-config edge outbox retry --force ID`") || !strings.Contains(f.Fix, "the other 1 this machine wrote after the copy: `devbox-config edge outbox retry ID` sends one as wide-01") {
		t.Errorf("doctor's device-identity:\n%+v", f)
	}

	code, out, errb := runCLI("edge", "outbox", "retry", before.Short())
	if code != 1 || !strings.Contains(errb, "queued before this outbox was copied") || !strings.Contains(errb, "retry --force") {
		t.Errorf("retry of a write queued before the copy: exit %d\n%s%s", code, out, errb)
	}
	runOK(t, "edge", "outbox", "retry", after.Short())
	if code, out, errb := runCLI("edge", "flush"); code != 1 || !d.landed("written on the copy before its rename") || d.landed("queued before the devbox was copied") {
		t.Fatalf("the copy's own write is sent, the original's is not: exit %d\n%s%s", code, out, errb)
	}
	if out := runOK(t, "edge", "outbox", "retry", "--force", before.Short()); !strings.Contains(out, "as device wide-01") {
		t.Errorf("retry --force: %s", out)
	}
}

// A held write in an outbox with no copy recorded (a device renamed in
// place, or a disk-level clone, which is not seen) is said both ways,
// and retried when asked: the tool cannot tell whose it is.
func TestAHeldWriteWithNoCopyRecordedIsSaidBothWays(t *testing.T) {
	d := newRemovedDevice(t, "tmp-0042")
	d.write("the first write")
	runOK(t, "edge", "flush")
	d.write("queued under the old id")
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "wide-01")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok)
	flushed := clonedFlush(t, d)
	held := heldOp(t, d.s.Path(), "old id")
	list := runOK(t, "edge", "outbox", "list")
	for _, text := range []string{flushed, runOK(t, "edge", "status")} {
		if !strings.Contains(text, "if this outbox was copied from a machine still in use, that machine sends it: `devbox-config edge outbox drop "+held.Short()+"`") || !strings.Contains(text, "if this devbox was renamed (a new device id or token in .env), or the machine it was copied from is gone for good and never sent it: `devbox-config edge outbox retry "+held.Short()+"` sends it as wide-01") {
			t.Errorf("it is not said both ways:\n%s", text)
		}
	}
	if !strings.Contains(list, "(a copy's original still in use sends it: drop it; renamed here, or the original gone for good: retry it)") {
		t.Errorf("edge outbox list:\n%s", list)
	}
	if f := deviceIdentity(t, d.home); !strings.Contains(f.Fix, "whose they are cannot be told here") || !strings.Contains(f.Fix, "or the machine it was copied from is gone for good and never sent them: `devbox-config edge outbox retry ID`") {
		t.Errorf("doctor's device-identity:\n%+v", f)
	}
	runOK(t, "edge", "outbox", "retry", held.Short())
}

// clonedFlush runs `edge flush`, which holds the writes queued as another
// device (exit 1), and returns what it printed.
func clonedFlush(t *testing.T, d *removedDevice) string {
	t.Helper()
	code, out, errb := runCLI("edge", "flush")
	if code != 1 || d.landed("queued before the devbox was copied") || d.landed("queued under the old id") {
		t.Fatalf("flush under the copy's own device: exit %d\n%s%s", code, out, errb)
	}
	return out
}

// heldOp is the dead op of the outbox at path whose payload holds text.
func heldOp(t *testing.T, path, text string) outbox.Op {
	t.Helper()
	s, err := outbox.OpenOptions(path, outbox.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ops, err := s.List(context.Background(), 10, outbox.Dead)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		if strings.Contains(string(o.Payload), text) {
			return o
		}
	}
	t.Fatalf("no dead op holds %q: %+v", text, ops)
	return outbox.Op{}
}

// deviceFinding is one of doctor's findings.
type deviceFinding struct{ ID, Severity, Message, Fix string }

// deviceIdentity is doctor's device-identity finding that is not info.
func deviceIdentity(t *testing.T, home string) deviceFinding {
	t.Helper()
	var out, errb strings.Builder
	run([]string{"doctor", "--home", home, "--json"}, &out, &errb)
	var doc struct{ Findings []deviceFinding }
	if err := json.Unmarshal([]byte(out.String()), &doc); err != nil {
		t.Fatalf("doctor --json: %v\n%s%s", err, out.String(), errb.String())
	}
	for _, f := range doc.Findings {
		if f.ID == "device-identity" && f.Severity != "info" {
			return f
		}
	}
	t.Fatalf("doctor says nothing of the device:\n%s", out.String())
	return deviceFinding{}
}

// Outside tester attack80 F3: on a copy given its own device, `retry
// --force` of a write queued before the copy that no flush has held yet
// sends it as the copy's device, as it does once held: it said "queued to
// be sent again" and the next flush held it again.
func TestRetryForceOfACopysQueuedOpSendsItAsTheNewDevice(t *testing.T) {
	d := newRemovedDevice(t, "tmp-0042")
	d.write("the original's first write")
	runOK(t, "edge", "flush") // the edge hears the gateway name the token tmp-0042
	d.write("queued before the devbox was copied")
	ops, _ := d.s.List(context.Background(), 10, outbox.Queued)
	path := d.s.Path()
	d.s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".copy", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".copy", path); err != nil { // the copied HOME's outbox: another inode
		t.Fatal(err)
	}
	t.Setenv("MEMPALACE_ORIGIN_DEVICE", "wide-01")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", d.wideTok)
	if len(ops) != 1 {
		t.Fatalf("queued: %+v", ops)
	}
	if out := runOK(t, "edge", "outbox", "retry", "--force", ops[0].Short()); !strings.Contains(out, "as device wide-01") {
		t.Errorf("retry --force of the queued op: %s", out)
	}
	if code, out, errb := runCLI("edge", "flush"); code != 0 || d.count("queued before the devbox was copied") != 1 {
		t.Errorf("the flush after it: exit %d, %d on the primary\n%s%s", code, d.count("queued before the devbox was copied"), out, errb)
	}
}
