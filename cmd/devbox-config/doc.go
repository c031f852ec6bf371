// Command devbox-config makes developer containers share one MemPalace
// memory across a fleet, opt-in and offline-first. See `devbox-config
// --help` and README.md.
//
// One file per command, each a small constructor (flags bound to the
// fields of a struct) and a run method: render.go, doctor.go, join.go,
// mailbox.go, version.go; edge.go (the proxy) with edge_status.go,
// edge_outbox.go and edge_flush.go; gateway.go (the group and the --config
// its subcommands share) with gateway_serve.go, gateway_init.go,
// gateway_device.go, gateway_token.go and gateway_audit.go. root.go builds
// the tree and runs it.
//
// Exit status is typed, never read from an error's text (exit.go): an
// exitError carries its code (1 a failure, 2 a usage mistake); argument
// validators, the flag-error func and the groups return usage errors
// already worded; any other error exits 1. testdata/usage.golden pins what
// every usage mistake prints, testdata/deps.txt the packages the binary
// links.
//
// This is the only package that reads the process environment
// (os.LookupEnv), handing it as a lookup to the ladder, render and doctor.
package main
