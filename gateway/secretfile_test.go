package gateway

import (
	"log/slog"
	"os"
	"strings"
	"testing"
)

// A gateway whose secret_file is gone while its config holds issued
// tokens refuses to start, naming the file and the fix, and makes no new
// secret (before: it made one and served, and every device's token failed
// as "revoked, expired, mistyped").
func TestAMissingSecretWithIssuedTokensRefusesToStart(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices[:1])
	cfg, err := LoadConfig(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	g.srv.Close()
	if err := os.Remove(cfg.SecretFile); err != nil {
		t.Fatal(err)
	}
	srv := &Server{ConfigFile: g.cfgFile, Upstream: g.up.url, BindHost: "127.0.0.1", Now: g.clock}
	err = srv.Open()
	if err == nil {
		srv.Close()
		t.Fatal("the gateway started with a new secret: every issued token is dead")
	}
	for _, want := range []string{cfg.SecretFile, "1 live token", "restore it from backup", "token revoke DEVICE", "token issue DEVICE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q lacks %q", err, want)
		}
	}
	if _, err := os.Stat(cfg.SecretFile); !os.IsNotExist(err) {
		t.Errorf("a new secret was written: %v", err)
	}

	// Once every token is revoked, a new secret is a first use again.
	Revoke(cfg.Device("laptop-7f3a"), "")
	if _, err := LoadSecret(cfg); err != nil {
		t.Errorf("no live token left, still refused: %v", err)
	}
}

// A well-formed secret_file that is not the one the config's tokens were
// issued under (another gateway's, a wrong backup) is refused at start,
// naming the file and the fix; the right one starts again. A state from
// before the check records it at first start; with no live token left a
// new secret is recorded again (before: it started, and every token was
// refused; attack46 N8).
func TestAWrongSecretWithIssuedTokensRefusesToStart(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices[:1])
	cfg, err := LoadConfig(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	g.srv.Close() // it recorded the check at its first start
	state := StateFile(g.cfgFile, cfg)
	if st, err := LoadState(state); err != nil || st.SecretCheck == "" {
		t.Fatalf("the first start recorded no check value in %s: %+v %v", state, st, err)
	}
	right, err := os.ReadFile(cfg.SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	open := func() error {
		srv := &Server{ConfigFile: g.cfgFile, Upstream: g.up.url, BindHost: "127.0.0.1", Now: g.clock}
		err := srv.Open()
		if err == nil {
			srv.Close()
		}
		return err
	}
	if err := os.WriteFile(cfg.SecretFile, []byte(randomHex(32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = open()
	if err == nil {
		t.Fatal("the gateway started with another secret: every issued token is refused")
	}
	for _, want := range []string{cfg.SecretFile, "1 live token", state, "from a backup", "token revoke DEVICE", "token issue DEVICE", "rotated with an older devbox-config's token commands", "delete secret_check from " + state} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q lacks %q", err, want)
		}
	}
	if err := os.WriteFile(cfg.SecretFile, right, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := open(); err != nil {
		t.Fatalf("the right secret is refused: %v", err)
	}
	// Once every token is revoked, another secret is a start over.
	Revoke(cfg.Device("laptop-7f3a"), "")
	if err := os.WriteFile(cfg.SecretFile, []byte(randomHex(32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckedSecret(cfg, state); err != nil {
		t.Errorf("no live token left, another secret is still refused: %v", err)
	}
}

// A gateway whose state file cannot be written at start (a config
// directory mounted read-only) still starts, unchecked, and says so: the
// secret check is a guard for a wrong secret, not a new need for a
// writable directory (a root test cannot chmod one read-only, so the
// lock file is made a directory).
func TestAStateFileThatCannotBeWrittenStartsUnchecked(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices[:1])
	cfg, err := LoadConfig(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	g.srv.Close()
	state := StateFile(g.cfgFile, cfg)
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	os.Remove(state + ".lock")
	if err := os.Mkdir(state+".lock", 0o700); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	srv := &Server{ConfigFile: g.cfgFile, Upstream: g.up.url, BindHost: "127.0.0.1", Now: g.clock, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := srv.Open(); err != nil {
		t.Fatalf("a state file that cannot be written stops the gateway: %v", err)
	}
	srv.Close()
	if !strings.Contains(logs.String(), "starting unchecked") {
		t.Errorf("nothing said the secret went unchecked:\n%s", logs.String())
	}
}
