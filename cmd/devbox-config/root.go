package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/mailbox"
)

const ladderHelp = `devbox-config wires MemPalace into developer containers (pi-devbox,
opencode-devbox) from the environment, at every container start.

The opt-in ladder (RFC 001 §1.2) is read from two variables:

  MEMPALACE_REMOTE_URL   MEMPALACE_EDGE   what the harness gets
  unset/blank            any              solitary: local stdio mempalace-mcp,
                                          only if it is on PATH or in
                                          ~/.local/bin (else nothing)
  set                    unset, 0, false  remote: straight to the primary over
                                          HTTP, bearer {env:MEMPALACE_REMOTE_TOKEN}
  set                    1, true          edge: "devbox-config edge", local-first
                                          writes, outbox to the primary, merged reads

With no MEMPALACE_* variables a container behaves exactly as before
(requirement R1 of RFC 001 §1.1).
Also read: MEMPALACE_REMOTE_TOKEN (never written to any file; harness configs
reference it by name), MEMPALACE_AGENT_NAME, MEMPALACE_ORIGIN_DEVICE,
MEMPALACE_ORIGIN_LABEL, PI_SETTINGS_MERGE (0 turns pi's settings merge off);
the edge's own: MEMPALACE_PALACE_PATH (the palace; set it in edge mode),
MEMPALACE_EDGE_TIMEOUT (every call to the primary, default 10s),
MEMPALACE_EDGE_LEASE (the outbox flush's hold, default 10s), MEMPALACE_EDGE_LOG,
MEMPALACE_EDGE_CHILD (see edge --help).`

// newRoot builds the command tree.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "devbox-config",
		Short:         "Share one MemPalace across a fleet of devboxes, opt-in and offline-first",
		Long:          ladderHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(usageHint)
	root.SetVersionTemplate("") // set by run when --version is asked for: versionText may hash the executable
	root.AddCommand(
		newRenderCmd(stdout, stderr),
		newEdgeCmd(os.Stdin, stdout, stderr),
		newBridgeCmd(os.Stdin, stdout, stderr),
		newGatewayCmd(stdout, stderr),
		newDoctorCmd(stdout, stderr),
		newVersionCmd(stdout),
		newMailboxCmd(stdout, stderr, os.LookupEnv),
		newJoinCmd(stdout, stderr, os.LookupEnv),
	)
	refuseUnknown(root)
	cobraCommands(root)
	return root
}

// cobraCommands adds the commands cobra makes itself (completion and its
// shells, help) with the habits of ours: completion refuses an unknown
// shell, a shell refuses an argument, and `help TOPIC` refuses a topic that
// names no command (exit 2, "run '… --help'"), where cobra's help prints
// the root's usage and exits 0. `help`, `help render`, `help edge outbox`
// are unchanged.
func cobraCommands(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		switch {
		case c.Name() == "completion":
			refuseUnknown(c)
			for _, shell := range c.Commands() {
				shell.Args = noArgs
			}
		case c.Name() == "help" && c.Run != nil:
			show := c.Run
			c.Run = nil
			c.RunE = func(c *cobra.Command, args []string) error {
				found, rest, err := c.Root().Find(args)
				if found == nil || err != nil || len(rest) > 0 {
					return exitError{exitUsage, fmt.Errorf("unknown help topic %q (run '%s --help' for usage)", strings.Join(args, " "), c.Root().CommandPath())}
				}
				show(c, args)
				return nil
			}
		}
	}
}

// run runs one command and returns its exit status: an exitError's code,
// else 1 for any error.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if slices.ContainsFunc(args, func(a string) bool { return a == "--version" || a == "-v" }) {
		root.SetVersionTemplate(versionText()) // plain text: no template actions
	}
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee exitError
	if !errors.As(err, &ee) {
		ee = exitError{exitFailure, err}
	}
	if msg := ee.Error(); msg != "" {
		fmt.Fprintln(stderr, "devbox-config:", msg)
	}
	return ee.code
}

// newLogger writes slog records to stderr as single key=value lines,
// without timestamps (container logs add their own).
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// printJSON prints v as every --json but doctor's does: indented, with a
// final newline; what names the command in the (unexpected) encoding error.
func printJSON(w io.Writer, what string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return failed(fmt.Errorf("%s: %w", what, err))
	}
	fmt.Fprintln(w, string(mailbox.PrintableJSON(b))) // text from the log or a device, printed to a terminal
	return nil
}
