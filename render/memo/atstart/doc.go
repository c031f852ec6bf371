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
// order, and among those ready, by import path (cmd/link's inittask
// schedule); this package imports only memo, which imports only os,
// syscall, io, io/fs, errors, bytes, strconv, slices and hash/fnv: nothing
// that imports strings, which sorts after reflect and so waits for it and
// for everything that needs it. It is scheduled right after os and
// unicode, 21 packages in (of 123), and the answer is printed before the
// rest initialise. TestAtStartInitialisesEarly keeps the imports so. A start the memo cannot answer returns from init and runs
// as it always did. `GODEBUG=inittrace=1 devbox-config render` shows where
// the line falls.
package atstart
