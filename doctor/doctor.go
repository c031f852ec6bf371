package doctor

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/render"
)

// Severity of a finding. Error and Warn make doctor exit 1.
type Severity string

const (
	Error Severity = "error"
	Warn  Severity = "warn"
	Info  Severity = "info"
)

// Finding ids: stable, for scripts.
const (
	IDKGSplit            = "kg-split"
	IDEntitiesSplit      = "entities-split"
	IDHallwaysSplit      = "hallways-split"
	IDPalaceLocation     = "palace-location"
	IDPalaceSharedParent = "palace-shared-parent"
	IDEmbedderSidecar    = "embedder-sidecar"
	IDEdgeVolume         = "edge-volume"
	IDEnvPermissions     = "env-permissions"
	IDTokenInConfig      = "token-in-config"
	IDTokenCleartext     = "token-cleartext"
	IDProposedPending    = "proposed-pending"
	IDPrimaryUnreachable = "primary-unreachable"
	IDPrimaryAuth        = "primary-auth"
	IDHostPin            = "host-pin"
	IDOriginHeader       = "origin-header"
	IDSyncShared         = "sync-shared"
	IDOutboxDead         = "outbox-dead"
	IDOutboxStorage      = "outbox-storage"
	IDOutboxBacklog      = "outbox-backlog"
	IDGatewayUpstream    = "gateway-upstream"
	IDOutboxHeld         = "outbox-held"
	IDOutboxInDoubt      = "outbox-in-doubt"
	IDOutboxIntents      = "outbox-intents"
	IDOutboxStayedLocal  = "outbox-stayed-local"
	IDOutboxCopied       = "outbox-copied"
	IDOutboxOlder        = "outbox-older"
	IDOutboxNewer        = "outbox-newer"
	IDStayedLocalRecord  = "stayed-local-record"
	IDPalaceDamaged      = "palace-damaged"
	IDVectorIndex        = "vector-index"
	IDRebuildCopyOutbox  = "rebuild-copy-outbox"
	IDJoinInterrupted    = "join-interrupted"
	IDRenderRecord       = "render-record"
	IDRenderRefuses      = "render-refuses"
	IDDeviceIdentity     = "device-identity"
	IDStrayServer        = "stray-server"
)

// Finding is one problem: what is wrong, where the RFC explains it, and the
// exact fix. It never carries a token.
type Finding struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Section  string   `json:"section"`
	Message  string   `json:"message"`
	Fix      string   `json:"fix"`
}

// Options configure a run.
type Options struct {
	// Home is the home directory; ~/.mempalace and the harness configs are
	// found under it.
	Home string
	// Dir is the directory the harnesses are started in (the cwd), where
	// entry-unused looks for project configs that replace the entry ("":
	// not looked at).
	Dir string
	// HomeFromFlag ignores XDG_CONFIG_HOME and PI_CODING_AGENT_DIR (as
	// render --home does).
	HomeFromFlag bool
	// Env is the environment; the ladder's variables are read through
	// ladder.Resolve, MEMPALACE_PALACE_PATH through the palace rules.
	Env ladder.Lookup
	// LookPath finds mempalace-mcp (for ladder.Resolve).
	LookPath ladder.LookPath
	// Names are the environment's variable names (a .env file's keys, or
	// os.Environ's), for env-unknown.
	Names []string
	// EnvFiles are the .env files whose permissions are checked (those that
	// do not exist are skipped).
	EnvFiles []string
	// MountInfo is the mount table read for edge-volume (default
	// /proc/self/mountinfo).
	MountInfo string
	// Timeout bounds all the primary's checks together (default 1.5 s).
	Timeout time.Duration
	// BacklogAge is how old the oldest queued op may be before
	// outbox-backlog (default 15 minutes).
	BacklogAge time.Duration
	// IntegrityTimeout bounds PRAGMA quick_check on each of the palace's
	// SQLite files (default 10 s).
	IntegrityTimeout time.Duration
	// SlowPrimary is the /healthz round trip above which the primary is
	// reported slow (default 500 ms).
	SlowPrimary time.Duration
	// StatFS tells a full or read-only file system under an outbox that
	// will not open (outbox.DiskSpace if nil).
	StatFS outbox.StatFS
	Now    func() time.Time
}

// DefaultIntegrityTimeout is Options.IntegrityTimeout's default.
const DefaultIntegrityTimeout = 10 * time.Second

func (o Options) withDefaults() Options {
	if o.Env == nil {
		o.Env = func(string) (string, bool) { return "", false }
	}
	if o.LookPath == nil {
		o.LookPath = func(string) (string, error) { return "", exec.ErrNotFound }
	}
	if o.MountInfo == "" {
		o.MountInfo = "/proc/self/mountinfo"
	}
	if o.Timeout <= 0 {
		o.Timeout = 1500 * time.Millisecond
	}
	if o.BacklogAge <= 0 {
		o.BacklogAge = 15 * time.Minute
	}
	if o.IntegrityTimeout <= 0 {
		o.IntegrityTimeout = DefaultIntegrityTimeout
	}
	if o.SlowPrimary <= 0 {
		o.SlowPrimary = 500 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// env is one variable, trimmed.
func (o Options) env(name string) string {
	v, _ := o.Env(name)
	return strings.TrimSpace(v)
}

// token is MEMPALACE_REMOTE_TOKEN as the ladder reads it (the one reader
// of the environment); callers must never put it in a finding.
func (o Options) token() string { return ladder.TokenSource(o.Env)() }

// palaceEnv is the palace rules' view of the environment: HOME is
// Options.Home.
func (o Options) palaceEnv(name string) (string, bool) {
	if name == "HOME" {
		return o.Home, o.Home != ""
	}
	return o.Env(name)
}

// mempalaceDir is ~/.mempalace.
func (o Options) mempalaceDir() string { return filepath.Join(o.Home, ".mempalace") }

// Palace is the palace directory by MemPalace's rules (ladder.PalacePath),
// the one the edge and join use.
func (o Options) Palace() (string, error) { return ladder.PalacePath(o.palaceEnv) }

// State is what the checks share: the ladder's reading (its settings and
// the fall-backs it took) and the palace.
type State struct {
	Settings ladder.Settings
	Warnings []ladder.Warning
	Palace   string
}

// Run runs every check and returns the findings, in a stable order.
func Run(ctx context.Context, opts Options) []Finding {
	opts = opts.withDefaults()
	st, findings := resolve(opts)
	// The primary's checks run beside the local ones: the run costs the
	// slower of the two, not their sum.
	type primaryResult struct {
		probe    Probe
		findings []Finding
	}
	done := make(chan primaryResult, 1)
	go func() {
		p, fs := CheckPrimary(ctx, opts, st)
		done <- primaryResult{p, fs}
	}()
	ob := readOutbox(ctx, opts, st)
	findings = append(findings, CheckPalaceLocation(opts, st)...)
	findings = append(findings, CheckPalaceSharedParent(opts, st)...)
	findings = append(findings, CheckSplits(opts, st)...)
	findings = append(findings, CheckPalaceIntegrity(ctx, opts, st)...)
	findings = append(findings, CheckVectorIndex(ctx, opts, st)...)
	findings = append(findings, CheckRebuildCopyOutbox(opts, st)...)
	findings = append(findings, CheckEdgeVolume(opts, st)...)
	findings = append(findings, CheckStrayServer(opts, st)...)
	findings = append(findings, CheckEnvPermissions(opts)...)
	findings = append(findings, CheckTokenInConfig(opts)...)
	plan := PlanRender(opts)
	findings = append(findings, CheckProposedPending(opts, plan)...)
	findings = append(findings, CheckRenderRecords(opts)...)
	findings = append(findings, CheckRenderRefuses(opts, plan)...)
	findings = append(findings, CheckOutbox(opts, ob)...)
	findings = append(findings, CheckJoins(opts, st)...)
	findings = append(findings, CheckPiExtension(opts, st)...)
	findings = append(findings, CheckEntryCommand(opts)...)
	findings = append(findings, CheckConfigShadowed(opts)...)
	findings = append(findings, CheckEntryUnused(opts, st)...)
	pr := <-done
	findings = append(findings, CheckEmbedderSidecar(opts, st, ob)...)
	findings = append(findings, queuedAsAnother(pr.findings, ob, pr.probe.Device)...)
	findings = append(findings, CheckAgentName(opts, st)...)
	return append(CheckEnv(opts, st, pr.probe), findings...)
}

// resolve reads the ladder and the palace. A palace that cannot be found
// (an unreadable config.json) is a finding about §7.1's files.
func resolve(opts Options) (State, []Finding) {
	s, warns := ladder.Resolve(opts.Env, render.LocalLookPath(render.OS{}, opts.Home, opts.LookPath)) // as render reads it
	st := State{Settings: s, Warnings: warns}
	p, err := opts.Palace()
	if err != nil {
		return st, []Finding{{ID: IDKGSplit, Severity: Error, Section: "§7.1",
			Message: "cannot find the palace: " + opts.mask(err.Error()),
			Fix:     "repair the config.json named (it must be a JSON object; palace_path is optional) or set MEMPALACE_PALACE_PATH"}}
	}
	st.Palace = p
	return st, nil
}

// Failing reports whether any finding is an error or a warning (exit 1).
func Failing(fs []Finding) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Severity == Error || f.Severity == Warn })
}
