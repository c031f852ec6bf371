// Command devbox-config makes developer containers share one MemPalace
// memory across a fleet, opt-in and offline-first. See `devbox-config
// --help` and README.md.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
