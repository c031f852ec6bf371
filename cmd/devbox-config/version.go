package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit and the Go version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(stdout, versionText())
			return nil
		},
	}
}

// versionText is what both `version` and `--version` print.
func versionText() string {
	c := commit
	if c == "" {
		c = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	return fmt.Sprintf("devbox-config %s\ncommit %s\n%s %s/%s\n", version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
