package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// The running gateway records what it did with its config, at start and
// at each reload, and ConfirmApplied reads it for an operator's command:
// the config it runs on is confirmed, a change it has not read is not, a
// change it refused is a *RefusedError with its reason (the previous
// config stays), and with no gateway on the log there is nothing to wait
// for.
func TestConfirmAppliedSaysWhatTheRunningGatewayDidWithTheConfig(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices[:1])
	if err := ConfirmApplied(g.cfgFile, time.Time{}, 0, nil); err != nil {
		t.Fatalf("the config the gateway started on: %v", err)
	}
	relabel := func(label string) time.Time {
		t.Helper()
		since := time.Now()
		if _, err := UpdateConfig(g.cfgFile, func(c *Config) error { c.Devices[0].Label, c.Devices[0].Agents = label, nil; return nil }); err != nil {
			t.Fatal(err)
		}
		return since
	}
	since := relabel("changed")
	if err := ConfirmApplied(g.cfgFile, since, 0, nil); !errors.Is(err, ErrNotConfirmed) {
		t.Fatalf("a change the gateway has not read: %v", err)
	}
	if err := g.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := ConfirmApplied(g.cfgFile, since, 0, nil); err != nil {
		t.Fatalf("a change the gateway took: %v", err)
	}

	since = relabel("again")
	if err := os.WriteFile(StateFile(g.cfgFile, g.srv.cfg.Load()), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if g.srv.Reload() == nil {
		t.Fatal("the gateway took a config whose state file it cannot read")
	}
	err := ConfirmApplied(g.cfgFile, since, 0, nil)
	if refused, ok := errors.AsType[*RefusedError](err); !ok || !strings.Contains(refused.Reason, "state_file") {
		t.Fatalf("a change the gateway refused: %v", err)
	}
	// The same bytes written again: the refusal on record is of a read
	// before this write, and says nothing of it (attack85 F12).
	if err := ConfirmApplied(g.cfgFile, time.Now(), 0, nil); !errors.Is(err, ErrNotConfirmed) {
		t.Fatalf("a record older than the write is trusted: %v", err)
	}

	g.srv.Close()
	if err := ConfirmApplied(g.cfgFile, time.Now(), 0, nil); err != nil {
		t.Errorf("no gateway runs: %v", err)
	}
}

// A hand save from a copy opened before a command (an editor's stale
// buffer), read by the gateway after the command's write, undoes the
// change: the command is told so (ErrUndone), not that the gateway took
// it, though the gateway took a file read after its write (attack86 F1:
// any later bytes were taken for a later command's). A view of the file
// as it is (no change to find) is still confirmed.
func TestConfirmAppliedSaysAChangeALaterSaveUndidIsNotInForce(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices[:1])
	stale, err := os.ReadFile(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	if _, err := UpdateConfig(g.cfgFile, func(c *Config) error { c.Devices[0].Label, c.Devices[0].Agents = "changed", nil; return nil }); err != nil {
		t.Fatal(err)
	}
	relabelled := func(c *Config) bool { return c.Devices[0].Label == "changed" }
	if err := os.WriteFile(g.cfgFile, stale, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := ConfirmApplied(g.cfgFile, since, 0, relabelled); !errors.Is(err, ErrUndone) {
		t.Errorf("a change a later save undid: %v", err)
	}
	if err := ConfirmApplied(g.cfgFile, since, 0, nil); err != nil {
		t.Errorf("the file as it is, which the gateway took: %v", err)
	}
}

// A refused config whose cause lies outside the file (the state file, as
// the refusal named it) is taken once the cause is corrected, with no
// save of the config and no SIGHUP: Watch tries it again while it stays
// refused, and logs the refusal once, not at every try (attack85 F12: a
// revoked token kept working until the config was saved again).
func TestARefusedConfigIsTakenOnceItsCauseIsCorrected(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices[:1])
	var logs testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logs, nil))
	g.srv.reloadRetry = time.Millisecond // every tick of Watch's
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.srv.Watch(ctx) }()
	defer func() { cancel(); <-done }()

	state := StateFile(g.cfgFile, g.srv.cfg.Load())
	kept, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(g.cfgFile) // a hand edit: UpdateConfig reads the state file too
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	c.Devices[0].Label = "relabelled"
	if err := c.Save(g.cfgFile); err != nil {
		t.Fatal(err)
	}
	if _, ok := errors.AsType[*RefusedError](ConfirmApplied(g.cfgFile, since, 5*time.Second, nil)); !ok {
		t.Fatal("the gateway did not refuse a config whose state file it cannot read")
	}
	read := readApplied(t, g.srv.instance.applied).Read
	for tries, deadline := 0, time.Now().Add(5*time.Second); tries < 2; time.Sleep(20 * time.Millisecond) { // it tries again, and again
		if a := readApplied(t, g.srv.instance.applied); !a.Read.Equal(read) {
			read, tries = a.Read, tries+1
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refused config is not tried again (%d tries)", tries)
		}
	}
	if n := strings.Count(logs.String(), "config change not applied"); n != 1 {
		t.Errorf("the refusal is logged %d times, want once:\n%s", n, logs.String())
	}

	since = time.Now()
	// Put back whole (a rename): written in place, a retry between the
	// truncate and the write read an empty file and refused it anew.
	if err := os.WriteFile(state+".new", kept, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(state+".new", state); err != nil {
		t.Fatal(err)
	}
	if err := ConfirmApplied(g.cfgFile, since, 5*time.Second, nil); err != nil {
		t.Fatalf("the corrected cause: %v", err)
	}
	if got := g.srv.cfg.Load().Devices[0].Label; got != "relabelled" {
		t.Errorf("the config in force labels the device %q", got)
	}
}

func readApplied(t *testing.T, file string) applied {
	t.Helper()
	var a applied
	b, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(b, &a)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// An operator who may read the config but not the gateway's lock or its
// record (a non-root user who edits the config; the gateway's audit
// directory is its own) cannot tell whether the running gateway took a
// change: ConfirmApplied says so, naming the file and the permission. It
// returned nil, "no gateway runs", before (attack85 F1).
func TestConfirmAppliedCannotTellWithoutPermission(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices[:1])
	files := []string{g.srv.cfg.Load().AuditLog + ".lock", g.srv.instance.applied}
	for _, f := range files {
		for _, other := range files {
			if err := os.Chmod(other, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(f, 0); err != nil {
			t.Fatal(err)
		}
		err := testbed.AsOtherUser(t, g.cfgFile, func() error { return ConfirmApplied(g.cfgFile, time.Now(), 0, nil) })
		if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), f) {
			t.Errorf("%s not readable: %v", f, err)
		}
	}
}
