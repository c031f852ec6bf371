// Command startcost is render's no-change start without the rest of
// devbox-config: render.Run with the CLI's options, no cobra, nothing else
// linked. Built with build tags it also links (and so initialises) one
// group of the edge's and gateway's dependencies, which shows what each
// group costs every process start whatever the subcommand:
//
//	go build -tags nethttp ./bench/startcost   # net/http, crypto/tls
//	go build -tags sqlite  ./bench/startcost   # modernc.org/sqlite (outbox, ledger)
//	go build -tags gosdk   ./bench/startcost   # go-sdk's mcp (edge, mailbox)
//	go build -tags nethttp,sqlite,gosdk ./bench/startcost
//
// bench/render-start.sh runs them beside hello and the real binary;
// BENCHMARKS.md has the figures.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"

	"github.com/joakimp/devbox-config/render"
)

func main() {
	home := os.Getenv("HOME")
	if len(os.Args) == 3 && os.Args[1] == "--home" {
		home = os.Args[2]
	}
	opts := render.Options{
		Home: home, HomeFromFlag: true,
		Env: os.LookupEnv, LookPath: exec.LookPath,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	results, _, err := render.Run(opts, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "startcost:", err)
		os.Exit(1)
	}
	for _, r := range results {
		if len(r.Changes) > 0 {
			// the benchmark is of the no-change start: a write means the
			// home was not in the steady state
			fmt.Fprintln(os.Stderr, "startcost: render wrote", r.File)
			os.Exit(1)
		}
	}
}
