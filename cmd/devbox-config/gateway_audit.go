package main

import (
	"crypto/ed25519"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/gateway"
)

// newGatewayAuditCmd is `gateway audit verify [FILE]`.
func newGatewayAuditCmd(g *gatewayConfig, stdout io.Writer) *cobra.Command {
	var pubFile string
	verify := &cobra.Command{
		Use: "verify [FILE]", Short: "Verify the audit log's hash chain and signed checkpoints (default: the config's audit_log)", Args: maxArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return verifyAudit(g, stdout, args, pubFile) },
	}
	verify.Flags().StringVar(&pubFile, "pubkey", "", "Ed25519 public key of the checkpoints (default: the config's signing_key_file.pub)")
	return group("audit", "Check the audit log", verify)
}

// verifyAudit checks the audit log named by args (else the config's) with
// the public key pubFile (else the config's signing key's).
func verifyAudit(g *gatewayConfig, stdout io.Writer, args []string, pubFile string) error {
	file := ""
	if len(args) == 1 {
		file = args[0]
	} else {
		c, err := g.load()
		if err != nil {
			return err
		}
		file = c.AuditLog
		if pubFile == "" && c.SigningKeyFile != "" {
			pubFile = c.SigningKeyFile + ".pub"
		}
	}
	var pub ed25519.PublicKey
	if pubFile != "" {
		k, err := gateway.PublicKey(pubFile)
		if err != nil {
			return failed(err)
		}
		pub = k
	}
	n, err := gateway.Verify(file, pub)
	if err != nil {
		return failed(fmt.Errorf("%s: %w", file, err))
	}
	fmt.Fprintf(stdout, "%s: %d lines, chain intact\n", file, n)
	return nil
}
