package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// Exit statuses: 0 success (and render's degraded paths), 1 a failure, 2 a
// usage mistake, 3 a gateway config change written but not known to be in
// force (the running gateway refused it, or did not say it took it).
const (
	exitFailure    = 1
	exitUsage      = 2
	exitNotInForce = 3
)

// exitError is an error with the exit status it means; run prints it
// (nothing when err is nil: the command already said why) and exits with
// code. An error of any other type exits 1.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

// failed is a failure (exit 1); failed(nil) exits 1 silently.
func failed(err error) error { return exitError{exitFailure, err} }

// usageError is a usage mistake (exit 2).
func usageError(format string, args ...any) error {
	return exitError{exitUsage, fmt.Errorf(format, args...)}
}

// usageHint is a usage mistake in c with the way to its help: what every
// refused flag, argument and subcommand says.
func usageHint(c *cobra.Command, err error) error {
	return exitError{exitUsage, fmt.Errorf("%w (run '%s --help' for usage)", err, c.CommandPath())}
}

// noArgs refuses any argument, as an unknown subcommand.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageHint(c, fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath()))
	}
	return nil
}

// exactArgs wants n arguments.
func exactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageHint(c, fmt.Errorf("%s: accepts %d arg(s), received %d", c.CommandPath(), n, len(args)))
		}
		return nil
	}
}

// maxArgs wants at most n arguments.
func maxArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) > n {
			return usageHint(c, fmt.Errorf("%s: accepts at most %d arg(s), received %d", c.CommandPath(), n, len(args)))
		}
		return nil
	}
}

// group is a command that only holds others: alone it shows its help; with
// an argument that names none of them it refuses it (exit 2), where cobra
// would show the help and exit 0.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short}
	c.AddCommand(subs...)
	refuseUnknown(c)
	return c
}

func refuseUnknown(c *cobra.Command) {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return usageHint(cmd, fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()))
	}
}
