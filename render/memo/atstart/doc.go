// Package atstart answers a container start's `devbox-config render` from
// the start memo when nothing render reads has changed, in an init
// function, and exits. cmd/devbox-config imports it for that alone, and it
// must stay the only importer.
//
// Why an init: render runs at every container start, and a Go program runs
// every linked package's init before main. The edge's and gateway's
// dependencies (go-sdk's mcp and its JSON schema package, encoding/gob,
// modernc.org/sqlite and its libc, net/http) cost more at start than
// render's whole no-change plan. Go initialises packages in dependency
// order, and among those ready, by import path; this package imports only
// memo (filewrite, encoding/json, crypto/sha256, os/exec), so it is ready,
// and sorts, before all of them: the answer is printed before they
// initialise. A start the memo cannot answer returns from init and runs
// as it always did. `GODEBUG=inittrace=1 devbox-config render` shows where
// the line falls.
package atstart
