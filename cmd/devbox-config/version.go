package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
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

// versionText is what both `version` and `--version` print. A build
// with neither a stamped commit nor one Go recorded (-buildvcs=false) is
// told apart by its executable's digest.
func versionText() string {
	c := commit
	if bi, ok := debug.ReadBuildInfo(); ok && c == "" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				c = s.Value
			}
		}
	}
	if c == "" {
		c = "unknown" + executableDigest()
	}
	return fmt.Sprintf("devbox-config %s\ncommit %s\n%s %s/%s\n", version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// executableDigest is " (executable sha256 " and the first 12 hex digits
// of the running executable's SHA-256, or "" when it cannot be read.
func executableDigest() string {
	path, err := os.Executable()
	if err != nil {
		return "" // no digest to show: the line says unknown alone
	}
	f, err := os.Open(path)
	if err != nil {
		return "" // as above
	}
	defer f.Close() // read only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "" // as above
	}
	return fmt.Sprintf(" (executable sha256 %x)", h.Sum(nil)[:6])
}
