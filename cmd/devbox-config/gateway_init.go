package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/gateway"
)

const gatewayInitHelp = `init writes a commented sample gateway config at --config (default
gateway.jsonc) with mode 0600, creating its directory (0700) if it is
missing: the server secret and the audit log's signing key beside it, the
audit log (with the op-id ledger, the trash and the provenance index) in
audit/ below it, away from the key, its checkpoints anchored to stderr, the
instruction wing (wing_instructions: every device reads it, only admin
devices whose write globs match it write it), and one example device commented out. It refuses to overwrite an existing file. Then: 'gateway
device add', 'gateway token issue', each with the same --config
(devbox-config gateway --config FILE device add ...) unless it is
./gateway.jsonc.`

// newGatewayInitCmd is `gateway init`.
func newGatewayInitCmd(g *gatewayConfig, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Write a commented sample config (0600) at --config; never overwrites",
		Long:  gatewayInitHelp,
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := gateway.WriteSample(g.file); err != nil {
				return failed(err)
			}
			fmt.Fprintf(stderr, "wrote %s (0600); next: %s\n", g.file, g.hint("device add ID ..."))
			return nil
		},
	}
}
