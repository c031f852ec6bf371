package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCLIReference keeps docs/cli.md equal to what `--help` prints for
// every command, so the command line's help and the docs say each thing
// once: the help is the source, the page is generated from it
// (UPDATE_GOLDEN=1 rewrites the page; otherwise any difference fails).
func TestCLIReference(t *testing.T) {
	page := filepath.Join("..", "..", "docs", "cli.md")
	for _, k := range os.Environ() { // defaults some flags take from the environment
		if name, _, _ := strings.Cut(k, "="); strings.HasPrefix(name, "MEMPALACE_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(newRoot(io.Discard, io.Discard), nil)

	var b strings.Builder
	b.WriteString("# Command reference\n\n" +
		"What `devbox-config … --help` prints, for every command. Generated from\n" +
		"the commands themselves by `TestCLIReference` (`UPDATE_GOLDEN=1 go test\n" +
		"./cmd/devbox-config -run CLIReference`); do not edit by hand.\n\n" +
		"Every command exits 2 on a usage mistake (an unknown command, flag or\n" +
		"`help` topic, a wrong argument count) and names the command to ask\n" +
		"`--help`; `devbox-config --version` prints what `version` prints. Shell\n" +
		"completion (`devbox-config completion bash|zsh|fish`) offers render's\n" +
		"targets after `--target`, also after a comma (`opencode,<TAB>`).\n\n")
	for _, p := range paths {
		name := strings.Join(append([]string{"devbox-config"}, p...), " ")
		fmt.Fprintf(&b, "- [%s](#%s)\n", name, strings.ReplaceAll(name, " ", "-"))
	}
	for _, p := range paths {
		code, out, errOut := runCLI(append(append([]string{}, p...), "--help")...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v --help: exit %d, stderr %q", p, code, errOut)
		}
		name := strings.Join(append([]string{"devbox-config"}, p...), " ")
		fmt.Fprintf(&b, "\n## %s\n\n```text\n%s```\n", name, out)
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(page, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(page)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 go test ./cmd/devbox-config -run CLIReference writes it)", err)
	}
	if b.String() != string(want) {
		t.Errorf("docs/cli.md differs from the commands' --help (UPDATE_GOLDEN=1 go test ./cmd/devbox-config -run CLIReference to regenerate it):\n%s", lineDiff(string(want), b.String()))
	}
}
