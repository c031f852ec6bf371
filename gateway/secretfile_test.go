package gateway

import (
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
