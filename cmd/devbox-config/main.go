// Command devbox-config makes developer containers share one MemPalace
// memory across a fleet, opt-in and offline-first. See `devbox-config
// --help` and README.md.
package main

import (
	"os"

	// A start's render with nothing changed is answered in this package's
	// init, before the edge's and gateway's packages initialise.
	_ "github.com/joakimp/devbox-config/render/memo/atstart"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
