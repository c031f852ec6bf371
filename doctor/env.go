package doctor

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/redact"
)

// Finding ids of the environment's checks.
const (
	IDEnvFallback  = "env-fallback"
	IDEnvUnknown   = "env-unknown"
	IDEnvDuplicate = "env-duplicate"
	IDWeakToken    = "weak-token"
	IDEdgeSettings = "edge-settings"
)

// MinTokenLen is the shortest token doctor treats as a secret. A shorter
// one is a finding of its own (weak-token): it is guessable, and it cannot
// be masked in what doctor quotes without blanking ordinary words that
// contain it (a token "example" inside "examples/").
const MinTokenLen = 16

// CheckEnv is env-fallback, env-unknown, edge-settings and weak-token (§1.2): every
// fall-back the ladder takes (what render would do with this environment)
// and every harness directory variable render ignores (a relative path),
// every name nobody reads, and a token too short to be a secret. p says
// whether the primary is a devbox-config gateway (its fixes differ).
func CheckEnv(opts Options, st State, p Probe) []Finding {
	var out []Finding
	for _, w := range st.Warnings {
		f := Finding{ID: IDEnvFallback, Severity: Warn, Section: "§1.2", Message: w.What(), Fix: w.Fix}
		switch w.Var {
		case ladder.EnvRemoteURL, ladder.EnvEdge:
			f.Severity = Error // the devbox is not on the rung .env asks for
			if w.Var == ladder.EnvRemoteURL && st.Settings.URL != "" {
				// render keeps the rung and warns: plain http off this host
				f.ID, f.Severity, f.Section = IDTokenCleartext, Warn, "R3"
				if st.Settings.TokenSet && !ladder.PrivateAddress(st.Settings.URL) {
					f.Message += "; doctor did not send it: it asked the primary's /healthz only, so whether the primary takes the token is unchecked"
				}
			}
		case ladder.LocalServer:
			if st.Settings.Mode == ladder.Solitary {
				continue // a devbox without MemPalace is a valid choice (R5), not a fall-back
			}
		case ladder.EnvEdgeTimeout, ladder.EnvEdgeLease:
			f.ID = IDEdgeSettings // the edge starts with the default
		case ladder.EnvRemoteToken:
			if st.Settings.TokenSet {
				f.Severity = Error // one no header can carry: every call fails
				break
			}
			if p.Reached {
				continue // the primary's own answer decides: primary-auth, or none needed
			}
			if p.Gateway {
				f.Fix = gatewayTokenFix
			}
		}
		out = append(out, f)
	}
	for _, w := range (harness.Env{Home: opts.Home, HomeFromFlag: opts.HomeFromFlag, Lookup: opts.Env}).Warnings() {
		out = append(out, Finding{ID: IDEnvFallback, Severity: Warn, Section: "§1.2", Message: w.What(), Fix: w.Fix})
	}
	out = append(out, envDuplicates(opts)...)
	for _, w := range ladder.CheckNames(opts.Names) {
		sev := Warn
		if strings.Contains(w.Message, "did you mean") {
			sev = Error // meant for someone, read by no one
		}
		out = append(out, Finding{ID: IDEnvUnknown, Severity: sev, Section: "§1.2", Message: w.What(), Fix: w.Fix})
	}
	if tok := opts.token(); tok != "" && len(tok) < MinTokenLen && opts.env(ladder.EnvRemoteURL) != "" {
		f := Finding{ID: IDWeakToken, Severity: Warn, Section: "§6.2",
			Message: fmt.Sprintf("%s is %d characters long: a token shorter than %d can be guessed, and doctor cannot hide it in what it quotes without blanking ordinary words", ladder.EnvRemoteToken, len(tok), MinTokenLen),
			Fix:     fmt.Sprintf("use a token of at least %d characters: in front of a bare mempalace serve, a new random one (`openssl rand -hex 32`) set as the primary's MEMPALACE_MCP_HTTP_TOKEN and here; behind a devbox-config gateway, the one `devbox-config gateway token issue DEVICE` prints", MinTokenLen)}
		if p.Gateway {
			f.Fix = fmt.Sprintf("use a token of at least %d characters: %s", MinTokenLen, gatewayTokenFix)
		}
		out = append(out, f)
	}
	return out
}

// envDuplicates is env-duplicate: a MEMPALACE_* name assigned on two
// lines of an .env file of opts.EnvFiles, of which the last wins
// (godotenv's rule and Compose's), said with both lines and no value
// (attack88 F3: a blank second URL left edge mode "without a URL").
func envDuplicates(opts Options) []Finding {
	var out []Finding
	for _, file := range opts.EnvFiles {
		src, err := os.ReadFile(file)
		if err != nil {
			continue // not there: env-permissions has nothing to say either
		}
		lines := confpos.EnvAssignments(src)
		for _, name := range slices.Sorted(maps.Keys(lines)) {
			at := lines[name]
			if len(at) < 2 || !strings.HasPrefix(name, "MEMPALACE_") {
				continue
			}
			where := make([]string, len(at))
			for i, n := range at {
				where[i] = fmt.Sprintf("%s:%d", file, n)
			}
			out = append(out, Finding{ID: IDEnvDuplicate, Severity: Warn, Section: "§1.2",
				Message: fmt.Sprintf("%s is assigned %d times, at %s: the last, %s, is the one read (by render, doctor and Docker Compose alike)", name, len(at), strings.Join(where, ", "), where[len(where)-1]),
				Fix:     fmt.Sprintf("keep one %s= line in %s, the value you mean, and delete the others", name, file)})
		}
	}
	return out
}

// CheckAgentName is device-identity's info for a devbox that reads a
// primary with no MEMPALACE_AGENT_NAME (nor MEMPALACE_EDGE_HARNESS, which
// render's templates set only inside a harness): the edge speaks as its
// harness, but `devbox-config mailbox` in a shell or a hook has no agent
// identity and fails, and the agent cannot be compared with the
// gateway's.
func CheckAgentName(opts Options, st State) []Finding {
	s := st.Settings
	if s.Mode == ladder.Solitary || s.URL == "" || s.AgentName != "" || opts.env(ladder.EnvEdgeHarness) != "" {
		return nil
	}
	return []Finding{{ID: IDDeviceIdentity, Severity: Info, Section: "§6.2",
		Message: fmt.Sprintf("%s is not set: inside a harness the edge speaks as the harness (render's templates set %s), but `devbox-config mailbox` run from this environment (a shell, a hook) has no agent identity and fails, and the agent is not compared with the device's agents at a gateway", ladder.EnvAgentName, ladder.EnvEdgeHarness),
		Fix:     fmt.Sprintf("set %s to the agent's name in .env (e.g. opencode: with %s it is opencode@<label>, one of the device's agents at the gateway), or pass --agent NAME@LABEL to devbox-config mailbox", ladder.EnvAgentName, ladder.EnvOriginLabel)}}
}

// gatewayTokenFix is what a device behind a devbox-config gateway puts in
// .env: its own token, never the upstream's shared one.
const gatewayTokenFix = "this primary is a devbox-config gateway: ask its operator for this device's own token (`devbox-config gateway token issue DEVICE` on the gateway's host, or `token rotate DEVICE` to replace a revoked or lost one; a device the operator removed takes no token under its id until it is added again: the same machine under its old id, `device add ID --reuse-removed-id` (it keeps its records and the trust others gave it) then `token issue ID`, another machine under a new one, `device add NEW-ID` (with `--take-removed-agents` if it answers as the removed one's agents) then `token issue NEW-ID`, with " + ladder.EnvOriginDevice + " changed to match) and put it in .env as " + ladder.EnvRemoteToken + ", then recreate the container; never the upstream's shared token (the gateway's MEMPALACE_UPSTREAM_TOKEN), which stays on the gateway's host"

// mask hides the token in text that came from outside doctor (a server's
// answer, the outbox's record of one, a file's contents): only a token of
// MinTokenLen or more, so words that merely contain a short one stay
// intact. doctor's own text never holds the token: it is never formatted
// into a finding.
func (o Options) mask(text string) string {
	if tok := o.token(); len(tok) >= MinTokenLen {
		// its encodings too (base64, hex, percent): a header Go quotes
		// whole in an error may carry them (attack62 N2)
		return redact.Secret(strings.ReplaceAll(text, tok, "[token]"), tok)
	}
	return text
}

// maskQuoted is mask for render's words about a user's file (a parse
// error quoting it): the token's forms alone, not the credential rule,
// which read "basic strings cannot have new lines" as a Basic credential
// (attack116 F2). Render hid the token and its pieces already.
func (o Options) maskQuoted(text string) string {
	if tok := o.token(); len(tok) >= MinTokenLen {
		return redact.Token(strings.ReplaceAll(text, tok, "[token]"), tok)
	}
	return text
}
