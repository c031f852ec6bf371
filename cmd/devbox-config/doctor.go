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

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/doctor"
)

const doctorHelp = `doctor checks, read-only, for what makes opting in lose data or fail silently,
one finding per problem with the exact fix and, as a reference, the RFC 001
section it comes from. Finding ids are stable, for scripts:

  env-fallback, env-unknown                  §1.2 a value render cannot use (and
                                                  the fall-back it takes), a name
                                                  nobody reads ("did you mean")
  edge-settings                              §1.2 an edge timeout or lease that
                                                  is not a duration: the default is used
  weak-token                                 §6.2 a token under 16 characters
  kg-split, entities-split                   §7.1 two files for one store
  hallways-split                             §7.1 a pre-3.3.6 ~/.mempalace/
                                                  hallways.json MemPalace
                                                  ignores
  palace-location                            §7.1 an earlier edge's outbox left
                                                  in ~/.mempalace/palace
  palace-shared-parent                       §7.1 the palace's parent directory
                                                  holds another palace: they
                                                  share tunnels.json
  embedder-sidecar                           §7.4 edge mode: embedder identity
  edge-volume                                §1.2 edge palace not on a volume
  stray-server                               §1.2 edge mode: a mempalace-mcp on
                                                  the palace no edge started
                                                  (names its pid)
  palace-damaged                             §1.2 the palace's SQLite files fail
                                                  quick_check
  vector-index                               §1.2 the drawers' vector index is
                                                  missing or an empty stand-in:
                                                  MemPalace refuses writes
  rebuild-copy-outbox                        §1.2 an edge outbox left in
                                                  MemPalace's pre-rebuild copy
  env-permissions, token-in-config           R3   the token where others read it
  proposed-pending                           §4.1 a .proposed nobody merged
  render-record                              §4.1 an unreadable .devbox-config.json:
                                                  render keeps every entry
  entry-command                              §4.1 a harness's MemPalace entry runs
                                                  a command that is not there
  entry-local-bin                            §4.1 an entry's mempalace-mcp is only
                                                  in ~/.local/bin, not on PATH
  config-shadowed                            §4.1 a harness config the harness
                                                  ignores (Amp: settings.json
                                                  hides settings.jsonc)
  entry-unused                               §4.1 a setting beside the entry makes
                                                  the harness not use it (blocked,
                                                  disabled, shadowed, merged into)
  primary-unreachable, primary-auth,         §6.2 /healthz, tools/list (401),
  host-pin, origin-header                         403 behind a proxy; behind a
                                                  gateway: the device's own token
  gateway-upstream                           §6.2 the gateway's upstream failed
  device-identity                            §6.2 .env's device, label or agent is
                                                  not what the gateway says the
                                                  token is; info: no agent name
                                                  (the mailbox has no identity)
  sync-shared                                §7.2 remote mode reaches mempalace_sync
  outbox-dead, outbox-backlog                §4.3 the edge's queue
  outbox-copied                              §6.2 info: the outbox is a copy of
                                                  another's, under the same
                                                  device id (a copied HOME)
  outbox-older                               §4.3 info: the outbox was made by an
                                                  older build; the next edge
                                                  command migrates it
  outbox-storage                             §4.3 the outbox's disk is full,
                                                  read-only or not this user's
                                                  (the file is whole: keep it)
  join-interrupted                           §4.4 a join that stopped half-way:
                                                  its queued records wait for
                                                  join --resume

The primary is checked only in remote and edge modes, within --timeout in all.
--fix does one thing: for a split store whose one side is empty it backs
both up to ~/.mempalace/doctor-backup-<time>/, keeps the side with data in
the palace (hallways.json beside it, where MemPalace 3.11 reads it) and
makes ~/.mempalace/<name> a symlink to it. It refuses when both sides hold
data (it never merges). Stop mempalace first.

Exit status: 0 when nothing is an error or a warning, 1 otherwise, 2 on
usage errors.`

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
		Long:  doctorHelp,
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return dc.run() },
	}
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
