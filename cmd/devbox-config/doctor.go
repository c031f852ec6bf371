package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/doctor"
)

const doctorHelpHead = `doctor checks, read-only, for what makes opting in lose data or fail silently,
one finding per problem with the exact fix and, as a reference, the RFC 001
section it comes from. Finding ids are stable, for scripts:
`

const doctorHelpTail = `The primary is checked only in remote and edge modes, within --timeout in all.
--fix does one thing: for a split store whose one side is empty it backs
both up to ~/.mempalace/doctor-backup-<time>/, keeps the side with data in
the palace (hallways.json beside it, where MemPalace 3.11 reads it) and
makes ~/.mempalace/<name> a symlink to it. It refuses when both sides hold
data (it never merges). Stop mempalace first.

Exit status: 0 when nothing is an error or a warning, 1 otherwise, 2 on
usage errors.`

// doctorHelp is doctor's --help: the catalogue of finding ids, from
// doctor.Catalogue, between its head and tail.
func doctorHelp() string {
	var b strings.Builder
	b.WriteString(doctorHelpHead + "\n")
	for _, k := range doctor.Catalogue() {
		ids := wrapWords(strings.Join(k.IDs, ", "), 35)
		about := wrapWords(k.About, 36)
		for i := 0; i < len(ids) || i < len(about); i++ {
			section := ""
			if i == 0 {
				section = k.Section
			}
			line := fmt.Sprintf("  %-37s%-5s%s", at(ids, i), section, at(about, i))
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
	}
	return b.String() + "\n" + doctorHelpTail
}

// wrapWords breaks s between words into lines of at most width runes (a
// longer word stands alone).
func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// at is lines[i], or "" past its end.
func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}

// doctorCmd is `doctor`: its flags, and run.
type doctorCmd struct {
	stdout, stderr io.Writer
	asJSON, fix    bool
	envFile, home  string
	timeout        time.Duration
}

func newDoctorCmd(stdout, stderr io.Writer) *cobra.Command {
	dc := &doctorCmd{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check a devbox for the traps of opting in (the token's exposure, split stores, the primary) before they bite",
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return dc.run() },
	}
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		c.Long = doctorHelp() // built when asked for, not at every start (render runs at each container start)
		c.Parent().HelpFunc()(c, args)
	})
	f := cmd.Flags()
	f.BoolVar(&dc.asJSON, "json", false, `print {"findings": [{"id", "severity", "section", "message", "fix"}]}`)
	f.StringVar(&dc.envFile, "env-file", "", "read the MEMPALACE_* variables from this .env file instead of the environment (and check its permissions; default: ./.env's)")
	f.StringVar(&dc.home, "home", "", "home directory to check (ignores XDG_CONFIG_HOME and PI_CODING_AGENT_DIR)")
	f.DurationVar(&dc.timeout, "timeout", 1500*time.Millisecond, "bound on the primary's checks, all together")
	f.BoolVar(&dc.fix, "fix", false, "converge a split knowledge graph / entities / hallways file onto the palace's copy by symlink, after a backup, when one side is empty")
	return cmd
}

func (dc *doctorCmd) run() error {
	if dc.timeout <= 0 {
		return usageError("--timeout %s: want a positive duration like 1.5s", dc.timeout)
	}
	opts := doctor.Options{Env: os.LookupEnv, LookPath: exec.LookPath, EnvFiles: []string{".env"}, Timeout: dc.timeout}
	se, err := readStartEnv(dc.home, dc.envFile)
	if err != nil {
		return err
	}
	opts.Home, opts.HomeFromFlag = se.home, se.homeFromFlag
	if wd, err := os.Getwd(); err == nil { // a cwd gone: no project configs to look at
		opts.Dir = wd
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		opts.Names = append(opts.Names, name)
	}
	if se.vars != nil {
		// every MEMPALACE_* variable (the ladder's and MEMPALACE_PALACE_PATH)
		// from the file only
		opts.Env = envFileLookup(se.vars, func(name string) bool { return strings.HasPrefix(name, "MEMPALACE_") || ladderVar(name) })
		opts.EnvFiles = []string{dc.envFile}
		opts.Names = opts.Names[:0] // the file's names are the ones that count
		for name := range se.vars {
			opts.Names = append(opts.Names, name)
		}
	}
	fixFailed := dc.fix && !dc.fixSplit(opts)
	findings := doctor.Run(context.Background(), opts)
	if dc.asJSON {
		if findings == nil {
			findings = []doctor.Finding{}
		}
		enc := json.NewEncoder(dc.stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"findings": findings}); err != nil {
			return failed(fmt.Errorf("doctor --json: %w", err))
		}
	} else {
		printFindings(dc.stdout, findings)
	}
	if fixFailed || doctor.Failing(findings) {
		return failed(nil) // the findings say why
	}
	return nil
}

// fixSplit is --fix: it converges what it can and says what it did; false
// when it failed (a split it refuses, both sides holding data, is a
// finding, not a failure).
func (dc *doctorCmd) fixSplit(opts doctor.Options) bool {
	results, err := doctor.FixSplit(opts)
	w := dc.stdout
	if dc.asJSON {
		w = dc.stderr // stdout carries exactly the findings object
	}
	for _, r := range results {
		fmt.Fprintln(w, "fix:", r.Message)
	}
	if len(results) == 0 && err == nil {
		fmt.Fprintln(w, "fix: no split store to converge")
	}
	if err != nil && !errors.Is(err, doctor.ErrBothHoldData) {
		fmt.Fprintln(dc.stderr, "devbox-config: doctor --fix:", err)
		return false
	}
	return true
}

func printFindings(w io.Writer, fs []doctor.Finding) {
	errs, warns := 0, 0
	for _, f := range fs {
		switch f.Severity {
		case doctor.Error:
			errs++
		case doctor.Warn:
			warns++
		}
		fmt.Fprintf(w, "%-5s %s (%s)\n  %s\n  fix: %s\n", f.Severity, f.ID, f.Section, f.Message, f.Fix)
	}
	if errs+warns == 0 {
		fmt.Fprintf(w, "doctor: nothing to fix (%d note(s))\n", len(fs))
		return
	}
	fmt.Fprintf(w, "doctor: %d error(s), %d warning(s)\n", errs, warns)
}
