package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/render"
)

const renderHelp = `render runs at every container start. For each harness config it sets the
MemPalace entry to what the ladder says, but only over a value devbox-config
wrote itself (remembered as a fingerprint in .devbox-config.json beside the
config). A value you edited is kept, and the environment's value goes to
<file>.proposed so that diff shows the change. It never prompts, and a
problem with a harness's file is a warning on stderr, exit status 0: only a
home directory that does not exist stops it (exit 2, nothing created).

Targets:
  opencode  $XDG_CONFIG_HOME/opencode (default ~/.config/opencode): mcp.mempalace
            in the file that holds it, else opencode.jsonc, else opencode.json,
            else a new opencode.jsonc. Comments and formatting are kept.
  pi        ~/.pi/agent/settings.json ($PI_CODING_AGENT_DIR): keys missing from
            the template are added; your values always win. Created only if
            --target names it. PI_SETTINGS_MERGE=0 turns it off.
  pi-mcp    ~/.pi/agent/mcp.json mcpServers.mempalace (pi-mcp-adapter), only if
            the file exists or --target names it.
  claude-code  ~/.claude.json ($CLAUDE_CONFIG_DIR) mcpServers.mempalace, under
            Claude Code's own ~/.claude.json.lock; token as ${MEMPALACE_REMOTE_TOKEN}.
  codex     ~/.codex/config.toml ($CODEX_HOME) [mcp_servers.mempalace], every
            byte outside the table kept; token by bearer_token_env_var.
  gemini    ~/.gemini/settings.json ($GEMINI_CLI_HOME) mcpServers.mempalace.
  cursor    ~/.cursor/mcp.json mcpServers.mempalace, token as ${env:...}.
  vscode    ~/.config/Code/User/mcp.json servers.mempalace, token as ${env:...}.
  copilot, cline, qwen, kilo, auggie, continue, crush, goose, zed, windsurf,
  roo, amp: each in its own user config, key and token syntax
            (docs/harnesses.md has the table).
  Every target but opencode and pi only when the harness's directory exists,
  or --target names it; with no MEMPALACE_* variables, one render never
  wrote an entry in is left alone at every start, unless --target names it
  (then its local stdio entry is written, and stays when you opt out; it
  needs mempalace-mcp on PATH or in ~/.local/bin, else the target is
  skipped with a warning).

Exit status: 0 on success and on degraded paths; 1 with --strict when a target
was skipped or a user's value kept; 2 on usage errors and a HOME (or --home)
that does not exist, or a relative HOME.`

// renderCmd is `render`: its flags, and run.
type renderCmd struct {
	stdout, stderr                            io.Writer
	dryRun, showDiff, reclaim, strict, asJSON bool
	token                                     string // MEMPALACE_REMOTE_TOKEN, redacted in what is printed
	envFile, home, piTemplate                 string
	targets                                   []string
}

func newRenderCmd(stdout, stderr io.Writer) *cobra.Command {
	rc := &renderCmd{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Make the harness configs say what the MEMPALACE_* environment says",
		Long:  renderHelp,
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return rc.run() },
	}
	f := cmd.Flags()
	f.BoolVar(&rc.dryRun, "dry-run", false, "write nothing; print each target's decision and a unified diff")
	f.BoolVar(&rc.showDiff, "diff", false, "print each target's decision and a unified diff of what is written")
	f.StringVar(&rc.envFile, "env-file", "", "read the MEMPALACE_* and PI_SETTINGS_MERGE variables from this .env file instead of the environment")
	f.StringSliceVar(&rc.targets, "target", nil, "targets to render: "+strings.Join(render.AllTargets, ", ")+" (default: all that are set up)")
	f.StringVar(&rc.home, "home", "", "home directory to render into (ignores XDG_CONFIG_HOME and PI_CODING_AGENT_DIR)")
	f.BoolVar(&rc.reclaim, "reclaim", false, "let the environment win over a managed entry you edited or deleted (your version is kept in a .bak)")
	f.BoolVar(&rc.strict, "strict", false, "exit 1 when a target was skipped or a user's value was kept")
	f.BoolVar(&rc.asJSON, "json", false, "print one JSON object per target: {target, file, mode, action, proposed_file, warnings}, with \"diff\" (a unified diff) under --diff or --dry-run")
	f.StringVar(&rc.piTemplate, "pi-template", "", "a JSON file of pi settings whose keys settings.json lacks are added to it (default: the embedded template)")
	cmd.RegisterFlagCompletionFunc("target", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return completeTargets(toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func (rc *renderCmd) run() error {
	log := newLogger(rc.stderr, slog.LevelInfo)
	opts, err := rc.options(log)
	if err != nil {
		return err
	}
	rc.token, _ = opts.Env(ladder.EnvRemoteToken)
	results, global, err := render.Run(opts, rc.dryRun)
	if err != nil {
		return usageError("%v", err)
	}
	once := map[string]bool{} // the run's own warnings, logged once by render.Run
	for _, w := range global {
		once[w.String()] = true
	}
	kept := false
	for _, r := range results {
		kept = kept || r.Kept()
		rc.print(r)
		for _, w := range r.Warnings {
			if !once[w] {
				log.Warn(w, "target", r.Target)
			}
		}
	}
	if rc.strict && kept {
		return failed(fmt.Errorf("--strict: a target was skipped or kept a user's value"))
	}
	return nil
}

// options are render's options as the flags and the environment say.
func (rc *renderCmd) options(log *slog.Logger) (render.Options, error) {
	opts := render.Options{Reclaim: rc.reclaim, Log: log, Env: os.LookupEnv, LookPath: exec.LookPath}
	se, err := readStartEnv(rc.home, rc.envFile)
	if err != nil {
		return opts, err
	}
	opts.Home, opts.HomeFromFlag = se.home, se.homeFromFlag
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		opts.Names = append(opts.Names, name)
	}
	if se.vars != nil {
		opts.Env = envFileLookup(se.vars, ladderVar)
		opts.Names = slices.Collect(maps.Keys(se.vars)) // the file's names are the ones that count
	}
	if rc.piTemplate != "" {
		b, err := os.ReadFile(rc.piTemplate)
		if err != nil {
			return opts, usageError("--pi-template: %v", err)
		}
		opts.PiTemplate, opts.PiTemplateName = b, rc.piTemplate
	}
	for _, t := range rc.targets {
		for _, part := range strings.Split(t, ",") {
			if part = strings.TrimSpace(part); part != "" {
				opts.Targets = append(opts.Targets, part)
			}
		}
	}
	return opts, nil
}

// print shows one target's result as the flags ask: nothing by default
// (the log says what changed), a line and a diff with --diff or
// --dry-run, an object per line with --json (the diff inside it, so
// stdout stays one JSON object per line).
func (rc *renderCmd) print(r render.Result) {
	withDiff := rc.dryRun || rc.showDiff
	var diff strings.Builder
	if withDiff { // a diff of a large config costs time: only when asked
		for _, c := range r.Changes {
			diff.WriteString(c.Diff(rc.token))
		}
	}
	// A Result holds strings only: Marshal cannot fail.
	switch {
	case rc.asJSON && withDiff:
		b, _ := json.Marshal(struct {
			render.Result
			Diff string `json:"diff"`
		}{r, diff.String()})
		fmt.Fprintln(rc.stdout, string(b))
	case rc.asJSON:
		b, _ := json.Marshal(r)
		fmt.Fprintln(rc.stdout, string(b))
	case withDiff:
		printResult(rc.stdout, r, rc.dryRun)
		fmt.Fprint(rc.stdout, diff.String())
	}
}

// completeTargets completes --target's comma-separated list: after
// "opencode," it offers "opencode,pi", "opencode,pi-mcp", … (what was typed,
// then each target not listed yet), since the shell matches a candidate
// against the whole word.
func completeTargets(toComplete string) []string {
	prefix, partial := "", toComplete
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		prefix, partial = toComplete[:i+1], toComplete[i+1:]
	}
	listed := map[string]bool{}
	for _, t := range strings.Split(strings.TrimSuffix(prefix, ","), ",") {
		if t = strings.TrimSpace(t); t == "" && prefix != "" {
			return nil // "opencode,," or ",": render would run no such list as typed
		} else if t != "" && !slices.Contains(render.AllTargets, t) {
			return nil // a name render refuses: nothing built on it
		}
		listed[t] = true
	}
	// "opencode, p": the space stays in the candidate (the shell matches the
	// whole word), render trims it
	trimmed := strings.TrimLeft(partial, " ")
	prefix += partial[:len(partial)-len(trimmed)]
	partial = trimmed
	var out []string
	for _, t := range render.AllTargets {
		if !listed[t] && strings.HasPrefix(t, partial) {
			out = append(out, prefix+t)
		}
	}
	return out
}

// startEnv is what --home and --env-file say, as render and doctor read
// them.
type startEnv struct {
	home         string
	homeFromFlag bool
	vars         map[string]string // the --env-file's variables; nil without one
}

func readStartEnv(home, envFile string) (startEnv, error) {
	se := startEnv{home: home, homeFromFlag: home != ""}
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return se, usageError("no home directory (set HOME or pass --home): %v", err)
		}
		se.home = h
	}
	from := homeEnv
	if se.homeFromFlag {
		from = homeFlag
	}
	if err := existingHome(se.home, from); err != nil {
		return se, err
	}
	if envFile != "" {
		vars, err := confpos.ReadEnv(envFile)
		var pe *confpos.Error
		if errors.As(err, &pe) {
			return se, usageError("%v", err) // FILE:LINE:COL: what (fix: how)
		}
		if to, lerr := os.Readlink(envFile); errors.Is(err, fs.ErrNotExist) && lerr == nil {
			return se, usageError("--env-file %s: it is a link to %s, which does not exist (the volume it is on not mounted?); fix: mount the volume it is on, or point the link at the .env that exists, or pass --env-file the real file", envFile, to)
		}
		if err != nil {
			return se, usageError("--env-file %s: %v", envFile, err)
		}
		se.vars = vars
	}
	return se, nil
}

// homeFrom is where the home existingHome checks came from: its fix says
// what to change.
type homeFrom int

const (
	homeEnv     homeFrom = iota // HOME, of a command that also takes --home
	homeFlag                    // --home
	homeEnvOnly                 // HOME, of a command without --home (edge, join)
)

// existingHome refuses a home that is not an existing directory, so that a
// mistyped HOME or --home is not grown into a new home, and a relative HOME
// (configs below whatever directory the command runs in, as a relative
// harness directory variable would put them). A relative --home is the
// user's own, typed at a shell: it stands.
func existingHome(home string, from homeFrom) error {
	if from != homeFlag && !filepath.IsAbs(home) {
		fix := "set HOME to your home directory's absolute path"
		if from == homeEnv {
			fix += ", or pass --home an existing directory"
		}
		what := "a relative path"
		if t := strings.TrimSpace(home); t != home && filepath.IsAbs(t) {
			what = "a path with whitespace around it, relative as it stands" // attack115 F5
		}
		return usageError("HOME is %q, %s, which would put configs below whatever directory this runs in; nothing done (fix: %s)", home, what, fix)
	}
	fi, err := os.Stat(home)
	if err == nil && fi.IsDir() {
		return nil
	}
	what := "which does not exist"
	switch {
	case strings.TrimSpace(home) != home:
		what += " (whitespace around it is part of the path)" // attack116 F4
		fallthrough
	default:
		home = fmt.Sprintf("%q", home) // a space or line break shown as one
	}
	switch {
	case err == nil:
		what = "which is not a directory"
	case !errors.Is(err, fs.ErrNotExist):
		what = fmt.Sprintf("which cannot be read (%v)", err)
	}
	switch from {
	case homeFlag:
		return usageError("--home is %s, %s; nothing done (fix: pass --home an existing directory)", home, what)
	case homeEnvOnly:
		return usageError("HOME is %s, %s; nothing done (fix: set HOME to your home directory)", home, what)
	}
	return usageError("HOME is %s, %s; nothing done (fix: set HOME to your home directory, or pass --home an existing directory)", home, what)
}

// envFileLookup reads the variables fromFile names from the env file's vars
// only, and everything else (PATH, XDG_*) from the process.
func envFileLookup(vars map[string]string, fromFile func(name string) bool) ladder.Lookup {
	return func(name string) (string, bool) {
		if fromFile(name) {
			v, ok := vars[name]
			return v, ok
		}
		return os.LookupEnv(name)
	}
}

// ladderVar: render reads the ladder's variables from an --env-file.
func ladderVar(name string) bool { return slices.Contains(ladder.Vars, name) }

func printResult(w io.Writer, r render.Result, dryRun bool) {
	when := ""
	if dryRun && len(r.Changes) > 0 {
		when = " (dry run: nothing written)"
	}
	fmt.Fprintf(w, "%s: %s %s [mode %s]%s\n", r.Target, r.Action, r.File, r.Mode, when)
	if r.ProposedFile != "" {
		fmt.Fprintf(w, "  proposed: %s\n", r.ProposedFile)
	}
	for _, a := range r.Added {
		fmt.Fprintf(w, "  added: %s\n", a)
	}
	for _, c := range r.Changes {
		kind := "write"
		switch {
		case c.New == nil:
			kind = "remove"
		case c.Old == nil:
			kind = "create"
		}
		fmt.Fprintf(w, "  %s %s\n", kind, c.Path)
	}
}
