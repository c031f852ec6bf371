// Command fakepalace runs the MemPalace test double as a program: over
// stdio (default; link or copy it as "mempalace-mcp" to stand in for the
// local palace) or over HTTP as a primary (`mempalace serve`).
//
//	fakepalace [--state DIR] [--embedder NAME] [--no-drawer-id] [--read-only]
//	fakepalace --http 127.0.0.1:8765 [--session-mode] [--state DIR] ...
//	fakepalace dump --state DIR
//
// The bearer token comes from MEMPALACE_MCP_HTTP_TOKEN, never argv (as
// `mempalace serve` hands it to its server). Stdio fault switches for
// tests: FAKEPALACE_LATENCY_MS=tool=ms,..., FAKEPALACE_CRASH_ON=tool (exit
// without answering), FAKEPALACE_GARBAGE_ON=tool (write a non-JSON line
// first). FAKEPALACE_TRACE=1 writes one stderr line per message received
// (stdio and HTTP). It is never part of the devbox-config binary.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(argv []string) int {
	if len(argv) > 0 && argv[0] == "dump" {
		fs := flag.NewFlagSet("dump", flag.ContinueOnError)
		state := fs.String("state", defaultPalace(), "palace state directory")
		if fs.Parse(argv[1:]) != nil {
			return 2
		}
		st, err := fakepalace.ReadDump(*state)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakepalace:", err)
			return 1
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(st)
		return 0
	}
	fs := flag.NewFlagSet("fakepalace", flag.ContinueOnError)
	state := fs.String("state", defaultPalace(), "palace state directory (persists across restarts)")
	fs.StringVar(state, "palace", *state, "alias of --state (mempalace-mcp's flag)")
	httpAddr := fs.String("http", "", "serve HTTP on this address instead of stdio, e.g. 127.0.0.1:8765")
	session := fs.Bool("session-mode", false, "issue and require Mcp-Session-Id (404 for an unknown session)")
	embedder := fs.String("embedder", "minilm", "embedder name; different names give incomparable distances")
	noDrawerID := fs.Bool("no-drawer-id", false, "omit drawer_id from search hits, as mempalace 3.6.0")
	readOnly := fs.Bool("read-only", false, "refuse mutating tools with -32003")
	allowInsecure := fs.Bool("allow-insecure", false, "allow a non-loopback bind without a token")
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	pl, err := fakepalace.New(fakepalace.Options{Dir: *state, Embedder: *embedder, OmitDrawerID: *noDrawerID, ReadOnly: *readOnly})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakepalace:", err)
		return 1
	}
	for _, spec := range strings.Split(os.Getenv("FAKEPALACE_LATENCY_MS"), ",") {
		if tool, ms, ok := strings.Cut(spec, "="); ok {
			n, _ := strconv.Atoi(ms)
			pl.SetLatency(tool, time.Duration(n)*time.Millisecond)
		}
	}
	if os.Getenv("FAKEPALACE_TRACE") == "1" {
		fakepalace.SetTrace(pl, os.Stderr)
	}
	if *httpAddr == "" {
		fakepalace.SetStdioFaults(pl, os.Getenv("FAKEPALACE_CRASH_ON"), os.Getenv("FAKEPALACE_GARBAGE_ON"), os.Stdout)
		if err := pl.ServeStdio(os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "fakepalace:", err)
			return 1
		}
		return 0
	}
	token := os.Getenv("MEMPALACE_MCP_HTTP_TOKEN")
	if token == "" && !fakepalace.IsLoopbackAddr(*httpAddr) && !*allowInsecure {
		fmt.Fprintln(os.Stderr, "fakepalace: refusing a non-loopback bind without MEMPALACE_MCP_HTTP_TOKEN (use --allow-insecure)")
		return 1
	}
	srv := pl.NewHTTP(fakepalace.HTTPOptions{Token: token, SessionMode: *session})
	if err := srv.Start(*httpAddr); err != nil {
		fmt.Fprintln(os.Stderr, "fakepalace:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "MemPalace MCP HTTP server listening on %s\n", srv.URL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	<-sig
	srv.Stop()
	return 0
}

// defaultPalace follows MemPalace: MEMPALACE_PALACE_PATH, else
// ~/.mempalace/palace.
func defaultPalace() string {
	if p := os.Getenv("MEMPALACE_PALACE_PATH"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".mempalace", "palace")
}
