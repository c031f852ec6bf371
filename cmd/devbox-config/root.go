package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

const ladderHelp = `devbox-config wires MemPalace into developer containers (pi-devbox,
opencode-devbox) from the environment, at every container start.

The opt-in ladder (RFC 001 §1.2) is read from two variables:

  MEMPALACE_REMOTE_URL   MEMPALACE_EDGE   what the harness gets
  unset/blank            any              solitary: local stdio mempalace-mcp,
                                          only if it is on PATH (else nothing)
  set                    unset, 0, false  remote: straight to the primary over
                                          HTTP, bearer {env:MEMPALACE_REMOTE_TOKEN}
  set                    1, true          edge: "devbox-config edge", local-first
                                          writes, outbox to the primary, merged reads

With no MEMPALACE_* variables a container behaves exactly as before (R1).
Also read: MEMPALACE_REMOTE_TOKEN (never written to any file; harness configs
reference it by name), MEMPALACE_AGENT_NAME, MEMPALACE_ORIGIN_DEVICE,
MEMPALACE_ORIGIN_LABEL, PI_SETTINGS_MERGE (0 turns pi's settings merge off).`

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return exitError{2, fmt.Errorf(format, args...)}
}

// newRoot builds the command tree.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "devbox-config",
		Short:         "Share one MemPalace across a fleet of devboxes, opt-in and offline-first",
		Long:          ladderHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exitError{2, fmt.Errorf("%w (run '%s --help' for usage)", err, c.CommandPath())}
	})
	root.AddCommand(newRenderCmd(stdout, stderr), newEdgeCmd(os.Stdin, stdout, stderr), newGatewayCmd(stdout, stderr), newDoctorCmd(stdout, stderr), newVersionCmd(stdout))
	root.AddCommand(newMailboxCmd(stdout, stderr, os.LookupEnv))
	root.AddCommand(newJoinCmd(stdout, stderr, os.LookupEnv))
	root.Version = version
	root.SetVersionTemplate("{{versionText}}")
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	strictHelp(root)
	usageHints(root)
	return root
}

func init() {
	cobra.AddTemplateFunc("versionText", versionText)
}

// strictHelp makes `help TOPIC` refuse a topic that names no command the way
// every other usage mistake is refused (exit 2, "run '… --help'"), where
// cobra's help command prints the root's usage and exits 0. `help`,
// `help render`, `help edge outbox` are unchanged.
func strictHelp(root *cobra.Command) {
	for _, h := range root.Commands() {
		if h.Name() != "help" || h.Run == nil {
			continue
		}
		show := h.Run
		h.Run = nil
		h.RunE = func(c *cobra.Command, args []string) error {
			found, rest, err := c.Root().Find(args)
			if found == nil || err != nil || len(rest) > 0 {
				return exitError{2, fmt.Errorf("unknown help topic %q (run '%s --help' for usage)", strings.Join(args, " "), c.Root().CommandPath())}
			}
			show(c, args)
			return nil
		}
	}
}

// usageHints makes every level of the command tree answer a mistake the same
// way: exit 2, the command named, and "run '… --help'". A command that only
// groups others (edge outbox, gateway device, completion) refuses an unknown
// subcommand instead of printing its help and exiting 0; a wrong number of
// arguments names the command (not just "accepts 1 arg(s)").
func usageHints(c *cobra.Command) {
	for _, sub := range c.Commands() {
		usageHints(sub)
	}
	hint := func(err error) error {
		return exitError{2, fmt.Errorf("%s: %w (run '%s --help' for usage)", c.CommandPath(), err, c.CommandPath())}
	}
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return exitError{2, fmt.Errorf("unknown command %q for %q (run '%s --help' for usage)", args[0], cmd.CommandPath(), cmd.CommandPath())}
		}
		return
	}
	if c.Args != nil && c.HasParent() {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				if strings.HasPrefix(err.Error(), "unknown command") {
					return exitError{2, fmt.Errorf("%w (run '%s --help' for usage)", err, cmd.CommandPath())}
				}
				return hint(err)
			}
			return nil
		}
	}
}

// run runs one command and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "devbox-config:", ee.err)
		}
		return ee.code
	}
	if strings.HasPrefix(err.Error(), "unknown command") {
		// the root's own check (cobra's legacyArgs), with its suggestions
		msg, _, _ := strings.Cut(err.Error(), "\n")
		fmt.Fprintf(stderr, "devbox-config: %s (run 'devbox-config --help' for usage)\n", msg)
		return 2
	}
	fmt.Fprintln(stderr, "devbox-config:", err)
	if strings.Contains(err.Error(), "accepts") {
		return 2
	}
	return 1
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
