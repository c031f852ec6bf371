package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
)

// `token issue` with a well-formed secret_file that is not the one the
// config's tokens were issued under is refused, naming the file and the
// fix, and issues nothing (before: it issued a token under the wrong
// secret, beside tokens no gateway on that secret accepts; attack46 N8).
func TestTokenIssueRefusesAWrongSecret(t *testing.T) {
	t.Parallel()
	cfg, _ := gatewayWithDevice(t)
	cli := gatewayCLI(t, cfg)
	cli(0, "device", "add", "desk-9b21")
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := make([]byte, 32)
	rand.Read(other)
	if err := os.WriteFile(c.SecretFile, []byte(hex.EncodeToString(other)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut := cli(1, "token", "issue", "desk-9b21")
	if !strings.Contains(errOut, c.SecretFile+" is not the secret recorded for the config's 1 live token(s)") || strings.Contains(out, gateway.TokenPrefix) {
		t.Errorf("token issue under another secret:\n%s%s", out, errOut)
	}
}
