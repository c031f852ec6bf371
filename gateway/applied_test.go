package gateway

import (
	"errors"
	"os"
	"strings"
	"testing"
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
	if err := ConfirmApplied(g.cfgFile, 0); err != nil {
		t.Fatalf("the config the gateway started on: %v", err)
	}
	relabel := func(label string) {
		t.Helper()
		if err := UpdateConfig(g.cfgFile, func(c *Config) error { c.Devices[0].Label, c.Devices[0].Agents = label, nil; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	relabel("changed")
	if err := ConfirmApplied(g.cfgFile, 0); !errors.Is(err, ErrNotConfirmed) {
		t.Fatalf("a change the gateway has not read: %v", err)
	}
	if err := g.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := ConfirmApplied(g.cfgFile, 0); err != nil {
		t.Fatalf("a change the gateway took: %v", err)
	}

	relabel("again")
	if err := os.WriteFile(StateFile(g.cfgFile, g.srv.cfg.Load()), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if g.srv.Reload() == nil {
		t.Fatal("the gateway took a config whose state file it cannot read")
	}
	err := ConfirmApplied(g.cfgFile, 0)
	if refused, ok := errors.AsType[*RefusedError](err); !ok || !strings.Contains(refused.Reason, "state_file") {
		t.Fatalf("a change the gateway refused: %v", err)
	}

	g.srv.Close()
	if err := ConfirmApplied(g.cfgFile, 0); err != nil {
		t.Errorf("no gateway runs: %v", err)
	}
}
