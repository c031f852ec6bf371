// Command fakepalace runs the MemPalace test double as a program: over
// stdio (default; link or copy it as "mempalace-mcp" to stand in for the
// local palace) or over HTTP as a primary (`mempalace serve`).
//
//	fakepalace [--state DIR] [--embedder NAME] [--no-drawer-id] [--read-only] [--release 3.9.0] [--instructions TEXT]
//	fakepalace --http 127.0.0.1:8765 [--session-mode] [--state DIR] ...
//	fakepalace dump --state DIR
//
// The bearer token comes from MEMPALACE_MCP_HTTP_TOKEN, never argv (as
// `mempalace serve` hands it to its server). Stdio fault switches for
// tests: FAKEPALACE_LATENCY_MS=tool=ms,..., FAKEPALACE_CRASH_ON=tool (exit
// without answering), FAKEPALACE_GARBAGE_ON=tool (write a non-JSON line
// first), FAKEPALACE_HOLD_ON=tool (every call of it waits until the
// program gets SIGUSR1), FAKEPALACE_IGNORE_SIGTERM=1 (only SIGKILL ends
// it, as a MemPalace stuck on a full disk), FAKEPALACE_MAX_ANSWER=bytes (exit instead of
// writing a longer answer: the edge's 64 MiB cap, lowered). FAKEPALACE_TRACE=1 writes one stderr line per message received
// (stdio and HTTP). It is never part of the devbox-config binary.
package main

import (
	"os"

	"github.com/joakimp/devbox-config/fakepalace"
)

func main() {
	os.Exit(fakepalace.Main(os.Args[1:]))
}
