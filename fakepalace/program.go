package fakepalace

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

	"github.com/joakimp/devbox-config/ladder"
)

// Main is the test double as a program (cmd/fakepalace, see its doc):
// argv without the program's name; it returns the exit status. A test
// binary can be the program too, with no build: see MainIfLinked.
func Main(argv []string) int {
	if len(argv) > 0 && argv[0] == "dump" {
		return dumpMain(argv[1:])
	}
	fs := flag.NewFlagSet("fakepalace", flag.ContinueOnError)
	state := fs.String("state", defaultPalace(), "palace state directory (persists across restarts)")
	fs.StringVar(state, "palace", *state, "alias of --state (mempalace-mcp's flag)")
	httpAddr := fs.String("http", "", "serve HTTP on this address instead of stdio, e.g. 127.0.0.1:8765")
	session := fs.Bool("session-mode", false, "issue and require Mcp-Session-Id (404 for an unknown session)")
	embedder := fs.String("embedder", "minilm", "embedder name; different names give incomparable distances")
	noDrawerID := fs.Bool("no-drawer-id", false, "omit drawer_id from search hits, as mempalace 3.6.0")
	readOnly := fs.Bool("read-only", false, "refuse mutating tools with -32003")
	release := fs.String("release", "", "the MemPalace release to play, e.g. 3.9.0 (default: the one the contract checks against the real server)")
	instructions := fs.String("instructions", "", "answer initialize with these server instructions (real MemPalace sends none)")
	allowInsecure := fs.Bool("allow-insecure", false, "allow a non-loopback bind without a token")
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	pl, err := New(Options{Dir: *state, Embedder: *embedder, OmitDrawerID: *noDrawerID, ReadOnly: *readOnly, Version: *release, Instructions: *instructions})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakepalace:", err)
		return 1
	}
	configureFromEnv(pl)
	if *httpAddr == "" {
		return serveStdioMain(pl)
	}
	return serveHTTPMain(pl, *httpAddr, *session, *allowInsecure)
}

// dumpMain is `fakepalace dump`: the palace's state as indented JSON.
func dumpMain(argv []string) int {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	state := fs.String("state", defaultPalace(), "palace state directory")
	if fs.Parse(argv) != nil {
		return 2
	}
	st, err := ReadDump(*state)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakepalace:", err)
		return 1
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(st)
	return 0
}

// configureFromEnv sets the test controls a test passes the program in
// FAKEPALACE_* variables: latency, holds, SIGTERM ignored, the answer
// cap, the trace.
func configureFromEnv(pl *Palace) {
	for _, spec := range strings.Split(os.Getenv("FAKEPALACE_LATENCY_MS"), ",") {
		if tool, ms, ok := strings.Cut(spec, "="); ok {
			n, _ := strconv.Atoi(ms)
			pl.SetLatency(tool, time.Duration(n)*time.Millisecond)
		}
	}
	if tool := os.Getenv("FAKEPALACE_HOLD_ON"); tool != "" {
		// Every call of tool waits until the program gets SIGUSR1 (a test
		// decides when a long call ends, as SetHold in process).
		release := make(chan os.Signal, 1)
		signal.Notify(release, syscall.SIGUSR1)
		pl.SetHold(tool, signalled(release))
	}
	if os.Getenv("FAKEPALACE_IGNORE_SIGTERM") == "1" {
		signal.Ignore(syscall.SIGTERM) // a server stuck in a call its SIGTERM handler cannot interrupt (MemPalace's chromadb on a full disk)
	}
	if n, err := strconv.Atoi(os.Getenv("FAKEPALACE_MAX_ANSWER")); err == nil {
		SetMaxAnswer(pl, n)
	}
	if os.Getenv("FAKEPALACE_TRACE") == "1" {
		SetTrace(pl, os.Stderr)
	}
}

// serveStdioMain serves stdio, with the faults FAKEPALACE_* asks for,
// until EOF.
func serveStdioMain(pl *Palace) int {
	SetStdioFaults(pl, os.Getenv("FAKEPALACE_CRASH_ON"), os.Getenv("FAKEPALACE_GARBAGE_ON"), os.Getenv("FAKEPALACE_FAIL_ON"), os.Getenv("FAKEPALACE_DAMAGED") == "1", os.Stdout)
	if err := pl.ServeStdio(os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fakepalace:", err)
		return 1
	}
	return 0
}

// serveHTTPMain serves HTTP on addr until SIGTERM, SIGINT or SIGHUP.
func serveHTTPMain(pl *Palace, addr string, session, allowInsecure bool) int {
	token := os.Getenv("MEMPALACE_MCP_HTTP_TOKEN")
	if token == "" && !IsLoopbackAddr(addr) && !allowInsecure {
		fmt.Fprintln(os.Stderr, "fakepalace: refusing a non-loopback bind without MEMPALACE_MCP_HTTP_TOKEN (use --allow-insecure)")
		return 1
	}
	srv := pl.NewHTTP(HTTPOptions{Token: token, SessionMode: session})
	if err := srv.Start(addr); err != nil {
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

// defaultPalace follows MemPalace 3.11 (ladder.PalacePath; "" when a
// config.json does not parse).
func defaultPalace() string {
	p, _ := ladder.PalacePath(os.LookupEnv)
	return p
}

// ProgramName is the name the test double answers to as MemPalace's stdio
// server.
const ProgramName = "mempalace-mcp"

// MainIfLinked makes a test binary the test double's program when it was
// started under ProgramName (through a link testbed.Self made): it runs
// Main and exits. Otherwise it returns at once. A test package that starts the
// program calls it first in its TestMain, so `go test -short` builds no
// binary for it.
func MainIfLinked() {
	if filepath.Base(os.Args[0]) == ProgramName {
		os.Exit(Main(os.Args[1:]))
	}
}

// signalled is a channel closed once sig delivers (a hold's release); the
// goroutine that closes it ends then, or with the program.
func signalled(sig <-chan os.Signal) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		<-sig
		close(done)
	}()
	return done
}
