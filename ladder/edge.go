package ladder

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/redact"
	"github.com/joakimp/devbox-config/shellword"
)

// The edge's and the gateway's own variables (besides the ladder's).
const (
	EnvEdgeChild     = "MEMPALACE_EDGE_CHILD"
	EnvEdgeTimeout   = "MEMPALACE_EDGE_TIMEOUT"
	EnvEdgeLease     = "MEMPALACE_EDGE_LEASE"
	EnvEdgeLog       = "MEMPALACE_EDGE_LOG"
	EnvEdgeHarness   = "MEMPALACE_EDGE_HARNESS"
	EnvPalacePath    = "MEMPALACE_PALACE_PATH"
	EnvUpstreamToken = "MEMPALACE_UPSTREAM_TOKEN"
)

// DefaultEdgeTimeout bounds every call to the primary unless
// MEMPALACE_EDGE_TIMEOUT says otherwise.
const DefaultEdgeTimeout = 10 * time.Second

// EdgeSettings is what `devbox-config edge` and its operator commands read:
// the ladder's validated settings plus the edge's own.
type EdgeSettings struct {
	Settings
	// Child is the local palace server's argv: exactly ["mempalace-mcp"]
	// unless MEMPALACE_EDGE_CHILD overrides it (RFC 001 §7.1: adding
	// --palace silently moves the knowledge graph).
	Child []string
	// Timeout bounds every call to the primary (MEMPALACE_EDGE_TIMEOUT).
	Timeout time.Duration
	// Lease is how long a flusher holds the outbox before another process
	// may take over (MEMPALACE_EDGE_LEASE; 0: the outbox's default).
	Lease time.Duration
	// LogLevel is MEMPALACE_EDGE_LOG (debug, info, warn, error).
	LogLevel slog.Level
	// Palace is the palace directory (MemPalace's own precedence).
	Palace string
	// Harness is MEMPALACE_EDGE_HARNESS, set by render's templates: the
	// harness the edge serves (opencode, pi, ...), validated as a name.
	Harness string
}

// Agent is the agent name the edge stamps and speaks as:
// MEMPALACE_AGENT_NAME, else the harness ("" when neither is usable).
func (s EdgeSettings) Agent() string {
	if s.AgentName != "" {
		return s.AgentName
	}
	return s.Harness
}

// Identity is the agent's address on the coordination log,
// <agent>@<label> (RFC 003 §3.2): Agent() and MEMPALACE_ORIGIN_LABEL.
// Without a label it is the bare name, which nobody in a fleet can
// address (§7.7); without a name it is "". Same format as
// mailbox.Identity.
func (s EdgeSettings) Identity() string {
	switch a := s.Agent(); {
	case a == "":
		return ""
	case s.OriginLabel == "":
		return a
	default:
		return a + "@" + s.OriginLabel
	}
}

// NoLabel says, for an identity Identity() leaves bare because
// MEMPALACE_ORIGIN_LABEL is unset, which agent name that is and the .env
// line that gives it its label: label is the device's (as a gateway
// names it; "" when not known, then a placeholder). "" when the identity
// has its label or no agent, or the label was refused (Resolve's warning
// says so).
func (s EdgeSettings) NoLabel(label string) string {
	a := s.Agent()
	if a == "" || s.OriginLabel != "" || s.OriginLabelRefused != "" {
		return ""
	}
	line, id, where := EnvOriginLabel+"=<label>", a+"@<label>", " (the device's label, as `devbox-config gateway device list` shows it)"
	if label != "" && LabelFault(label) == "" {
		line, id, where = EnvOriginLabel+"="+shellword.Quote(label), a+"@"+label, ""
	}
	return fmt.Sprintf("the agent identity is the bare %q: %s is unset in .env, so it is not %q, the address other devices write to; add the line `%s` to .env%s", a, EnvOriginLabel, id, line, where)
}

// ResolveEdge reads the edge's settings. Like Resolve, what it cannot use
// becomes a warning, and the edge never acts on a value Resolve rejected
// (an origin device render refuses is never stamped). A timeout or lease
// that is not a duration is the default, with Resolve's warning (render
// gives it when it writes the edge's entry): refusing to start would leave
// the harness without MemPalace's tools.
func ResolveEdge(env Lookup, lookPath LookPath) (EdgeSettings, []Warning, error) {
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	child := []string{LocalServer}
	if v := get(EnvEdgeChild); v != "" {
		child = strings.Fields(v)
	}
	// The local server the edge will start is the one to look for; any
	// other name (devbox-config itself) is looked for as it is.
	base, warns := Resolve(env, func(name string) (string, error) {
		if name == LocalServer {
			name = child[0]
		}
		return lookPath(name)
	})
	s := EdgeSettings{Settings: base, Child: child, Timeout: DefaultEdgeTimeout, LogLevel: slog.LevelInfo}
	t := edgeDurations(get) // Resolve warned of them
	s.Timeout, s.Lease = t.timeout, t.lease
	tok := get(EnvRemoteToken)
	switch v := get(EnvEdgeLog); strings.ToLower(v) {
	case "", "info":
	case "debug":
		s.LogLevel = slog.LevelDebug
	case "warn", "warning":
		s.LogLevel = slog.LevelWarn
	case "error":
		s.LogLevel = slog.LevelError
	default:
		warns = append(warns, Warning{Var: EnvEdgeLog, Message: fmt.Sprintf("%s is not one of debug, info, warn, error; info is used", shown(v, tok))})
	}
	if v := get(EnvEdgeHarness); v != "" {
		if validName(v) {
			s.Harness = v
		} else {
			warns = append(warns, Warning{Var: EnvEdgeHarness, Message: fmt.Sprintf("%s is not a valid MemPalace agent name; ignored", shown(v, tok))})
		}
	}
	palace, err := PalacePath(env)
	if err != nil {
		return s, warns, err
	}
	s.Palace = palace
	return s, warns, nil
}

// TokenSource reads MEMPALACE_REMOTE_TOKEN afresh at every call, so a
// rotated token is picked up; the value is never kept.
func TokenSource(env Lookup) func() string {
	return func() string { v, _ := env(EnvRemoteToken); return strings.TrimSpace(v) }
}

// UpstreamToken is MEMPALACE_UPSTREAM_TOKEN: the gateway's bearer for the
// MemPalace behind it ("" when unset).
func UpstreamToken(env Lookup) string {
	v, _ := env(EnvUpstreamToken)
	return strings.TrimSpace(v)
}

// ChildEnviron is the environment for the local palace server: the edge's
// own, without the primary's token (the child has no use for it), and
// with MEMPALACE_PALACE_PATH set to the palace the edge resolved, so the
// child's palace is the one holding the edge's outbox even where a later
// MemPalace finds its palace by other rules. Not --palace: MemPalace 3.11
// moves the knowledge graph into the palace with that flag (RFC 001 §7.1).
func ChildEnviron(environ []string, palace string) []string {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, EnvRemoteToken+"=") && !strings.HasPrefix(kv, EnvPalacePath+"=") {
			out = append(out, kv)
		}
	}
	return append(out, EnvPalacePath+"="+palace)
}

// edgeTimings are MEMPALACE_EDGE_TIMEOUT and MEMPALACE_EDGE_LEASE as the
// edge uses them (a lease of 0 is the outbox's default, 10s), with a
// warning for each that is not a duration the edge can use.
type edgeTimings struct {
	timeout, lease time.Duration
	warns          []Warning
}

func edgeDurations(get func(string) string) edgeTimings {
	t := edgeTimings{timeout: DefaultEdgeTimeout}
	tok := get(EnvRemoteToken)
	read := func(name string, least time.Duration, what string, into *time.Duration) {
		v := get(name)
		if v == "" {
			return
		}
		if d, err := time.ParseDuration(v); err == nil && d >= least {
			*into = d
			return
		}
		fix := name + "=10s (a duration with its unit: 10s, 1m30s, 500ms), or remove it for the default"
		// a bare number is proposed in seconds only when that is accepted (0s is not)
		if n, err := strconv.ParseUint(v, 10, 32); err == nil && time.Duration(n)*time.Second >= least && redact.NotShown(v, tok) == "" {
			fix = name + "=" + v + "s (a duration with its unit: s, m, ms), or remove it for the default"
		}
		t.warns = append(t.warns, Warning{Var: name, Fix: fix,
			Message: fmt.Sprintf("%s is not %s with its unit; the edge uses the default, 10s", shown(v, tok), what)})
	}
	read(EnvEdgeTimeout, time.Nanosecond, "a positive duration", &t.timeout)
	read(EnvEdgeLease, 100*time.Millisecond, "a duration of at least 100ms", &t.lease)
	return t
}
