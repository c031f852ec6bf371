// Package ladder turns the MEMPALACE_* environment into one of the three
// rungs of RFC 001 §1.2 (solitary, direct remote, edge) plus validated
// settings and human-readable warnings.
//
// The ladder never fails: container start must not break because of a typo
// in .env. Anything it cannot use becomes a warning and the nearest safe
// rung is chosen instead.
package ladder

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/invisible"
	"github.com/joakimp/devbox-config/redact"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mode is a rung of the opt-in ladder.
type Mode string

const (
	// Solitary is the default: the harness talks to a local stdio
	// mempalace-mcp (R1). With no mempalace-mcp found (render's lookPath
	// also looks in pipx's ~/.local/bin: render's PATH need not be the
	// login shell's) no entry is added where there is none (R5), and one
	// render wrote goes.
	Solitary Mode = "solitary"
	// Remote talks straight to the primary over HTTP; no local palace.
	Remote Mode = "remote"
	// Edge runs `devbox-config edge`: local-first writes, an outbox to the
	// primary, merged reads.
	Edge Mode = "edge"
)

// Environment variable names read by the ladder.
const (
	EnvRemoteURL     = "MEMPALACE_REMOTE_URL"
	EnvRemoteToken   = "MEMPALACE_REMOTE_TOKEN"
	EnvEdge          = "MEMPALACE_EDGE"
	EnvAgentName     = "MEMPALACE_AGENT_NAME"
	EnvOriginDevice  = "MEMPALACE_ORIGIN_DEVICE"
	EnvOriginLabel   = "MEMPALACE_ORIGIN_LABEL"
	EnvPiSettingsMrg = "PI_SETTINGS_MERGE"
)

// Vars lists every variable the ladder reads, in documentation order (the
// edge's timeout and lease: render warns of one the edge cannot use).
var Vars = []string{EnvRemoteURL, EnvRemoteToken, EnvEdge, EnvAgentName, EnvOriginDevice, EnvOriginLabel, EnvPiSettingsMrg, EnvEdgeTimeout, EnvEdgeLease}

// LocalServer is the solitary stdio server's command (exactly the argv the
// images use today; RFC 001 §7.1 forbids adding --palace).
const LocalServer = "mempalace-mcp"

// EdgeCommand is the command the edge rung's entry starts
// ("devbox-config edge"): this binary, as installed on the devbox's PATH.
const EdgeCommand = "devbox-config"

// Settings is the validated result of reading the ladder.
//
// The token itself is deliberately not kept: render only needs to know
// whether one is set, and a value that is never stored cannot leak into a
// file, a log line or --json output.
type Settings struct {
	Mode Mode
	// URL is the primary's MCP endpoint (remote and edge modes).
	URL string
	// URLProblem says why MEMPALACE_REMOTE_URL was set but not used, and
	// its fix ("" when it is unset or used): a malformed URL is told apart
	// from an unset one.
	URLProblem string
	// TokenSet reports whether MEMPALACE_REMOTE_TOKEN is non-blank.
	TokenSet bool
	// LocalServerFound reports whether lookPath found mempalace-mcp (on
	// PATH; render's lookPath also looks in ~/.local/bin).
	LocalServerFound bool
	AgentName        string
	// AgentNameRefused is MEMPALACE_AGENT_NAME as given when it is not a
	// valid agent name ("" otherwise): the edge tells the session.
	AgentNameRefused string
	OriginDevice     string
	OriginLabel      string
	// OriginLabelRefused is MEMPALACE_ORIGIN_LABEL as given when it is
	// not valid as an agent name is ("" otherwise): the edge tells the
	// session.
	OriginLabelRefused string
	// PiSettingsMerge is false when PI_SETTINGS_MERGE=0 disables pi's
	// settings merge.
	PiSettingsMerge bool
}

// NoURL says why there is no primary's URL: unset, or malformed with the
// fix.
func (s Settings) NoURL() string {
	if s.URLProblem != "" {
		return EnvRemoteURL + " is malformed: " + s.URLProblem
	}
	return EnvRemoteURL + " unset"
}

// Register reports whether a harness gets a mempalace entry. Only solitary
// mode without a local server (render finds it on PATH or in pipx's
// ~/.local/bin, render.LocalLookPath) adds none (R5): render then removes
// an entry it wrote and leaves any other as it is.
func (s Settings) Register() bool {
	return s.Mode != Solitary || s.LocalServerFound
}

// Warning is one line of advice for the operator; never fatal.
type Warning struct {
	Var     string // the variable it is about, e.g. MEMPALACE_EDGE
	Message string // what is wrong, and the fall-back taken
	Fix     string // the exact change that makes it right
}

// String is the warning as render prints it: "VAR: message (fix: fix)".
func (w Warning) String() string {
	if w.Fix == "" {
		return w.What()
	}
	return w.What() + " (fix: " + w.Fix + ")"
}

// What is the warning without its fix, "VAR: message" (doctor gives the
// fix apart).
func (w Warning) What() string { return w.Var + ": " + w.Message }

// Lookup returns the value of an environment variable, as os.LookupEnv.
type Lookup func(name string) (string, bool)

// LookPath reports whether a command is on PATH, as exec.LookPath.
type LookPath func(file string) (string, error)

// validName follows MemPalace's sanitize_name (mempalace-surface §4), so a
// value accepted here is accepted by the palace: up to 128 characters,
// letters and digits at both ends, letters, digits, _ . ' - and space
// between, no "..". (A plain loop: compiling the equivalent \pL regexp
// cost 1.3 ms at every container start.)
func validName(v string) bool {
	r := []rune(v)
	if len(r) == 0 || len(r) > 128 || strings.Contains(v, "..") {
		return false
	}
	for i, c := range r {
		if i == 0 || i == len(r)-1 {
			if !nameEnd(c) {
				return false
			}
		} else if !nameRune(c) {
			return false
		}
	}
	return true
}

// nameEnd: c may begin and end a name (a letter or a digit, not one that
// shows as nothing: the Hangul filler U+3164 is a letter, and the gateway
// refuses it in a device's agents); nameRune: c may stand inside one
// (those, and _ . ' - and space).
func nameEnd(c rune) bool {
	return (unicode.IsLetter(c) || unicode.IsDigit(c) || unicode.Is(unicode.N, c)) && !invisible.Is(c)
}
func nameRune(c rune) bool { return nameEnd(c) || strings.ContainsRune("_ .'-", c) }

// NameFaults are the characters of v no agent name may hold anywhere,
// each quoted and escaped once, at most five.
func NameFaults(v string) []string {
	var bad []string
	for _, r := range v {
		if q := strconv.QuoteRune(r); !nameRune(r) && !slices.Contains(bad, q) && len(bad) < 5 {
			bad = append(bad, q)
		}
	}
	return bad
}

// LabelFault is why v cannot be a device's label ("": it can): the label
// is half of the agent's address (<agent>@<label>) and of added_by, so it
// is checked as an agent name is (validName). MEMPALACE_ORIGIN_LABEL and
// the gateway's device labels both ask it: the gateway gives no device a
// label its devbox would refuse.
func LabelFault(v string) string {
	if validName(v) {
		return ""
	}
	if bad := NameFaults(v); len(bad) > 0 {
		return "holds " + strings.Join(bad, ", ") + ", which a label may not hold"
	}
	return "is not a valid label"
}

// LabelRule is what LabelFault lets through, in words.
const LabelRule = "letters, digits, _ . ' - and space, up to 128, first and last a letter or digit, no \"..\", as an agent name"

// HoldsToken reports whether data holds MEMPALACE_REMOTE_TOKEN's value
// literally (render keeps its backup of such a file owner-only).
func HoldsToken(env Lookup, data []byte) bool {
	tok, _ := env(EnvRemoteToken)
	tok = strings.TrimSpace(tok)
	return tok != "" && bytes.Contains(data, []byte(tok))
}

// Resolve reads the ladder. It never returns an error: problems become
// warnings and the safest applicable mode is chosen.
func Resolve(env Lookup, lookPath LookPath) (Settings, []Warning) {
	get := func(k string) string {
		v, _ := env(k)
		return strings.TrimSpace(v)
	}
	tok := get(EnvRemoteToken)
	shown := func(v string) string { return shown(v, tok) }
	var warns []Warning
	warn := func(v, fix, format string, args ...any) {
		warns = append(warns, Warning{Var: v, Message: fmt.Sprintf(format, args...), Fix: fix})
	}

	s := Settings{Mode: Solitary, PiSettingsMerge: true}
	_, err := lookPath(LocalServer)
	s.LocalServerFound = err == nil

	edge, edgeOK := parseBool(get(EnvEdge))
	if !edgeOK {
		warn(EnvEdge, EnvEdge+"=1 for edge mode, "+EnvEdge+"=0 (or remove it) for none", "%s is not one of 1, true, 0, false; treated as unset", shown(get(EnvEdge)))
		edge = false
	}

	if raw := get(EnvRemoteURL); raw != "" {
		if p := checkURL(raw, tok); p.problem != "" {
			s.URLProblem = p.problem + " (fix: " + p.fix + ")"
			warn(EnvRemoteURL, p.fix, "%s; staying solitary", p.problem)
		} else {
			s.URL = raw
			s.Mode = Remote
			if edge {
				s.Mode = Edge
			}
			if Cleartext(raw) {
				warn(EnvRemoteURL, "serve the primary (or the gateway in front of it) over https:// and write "+EnvRemoteURL+"=https://..., or reach it through a loopback tunnel (http://127.0.0.1:PORT/mcp)",
					"%s is neither https:// nor loopback: the bearer token would cross the network in clear text", RedactURL(raw))
			}
		}
	} else if edge {
		warn(EnvEdge, "set "+EnvRemoteURL+"=https://HOST/mcp (the primary's or its gateway's endpoint) and "+EnvRemoteToken+", or remove "+EnvEdge,
			"set without %s; edge mode needs a primary, staying solitary", EnvRemoteURL)
	}

	s.TokenSet = tok != ""
	checkReach(s, tok, lookPath, warn)
	resolveIdentity(&s, get, tok, warn)
	warns = append(warns, edgeDurations(get).warns...)
	if v := get(EnvPiSettingsMrg); v != "" {
		merge, ok := parseBool(v)
		if !ok {
			warn(EnvPiSettingsMrg, EnvPiSettingsMrg+"=0 to stop render merging pi's settings, or remove it", "%s is not one of 1, true, 0, false; the merge stays enabled", shown(v))
			merge = true
		}
		s.PiSettingsMerge = merge
	}
	return s, warns
}

// secondAssignment is the name of a variable assigned after whitespace in
// tok, as a .env line "MEMPALACE_REMOTE_TOKEN=… MEMPALACE_EDGE=1" makes it
// (attack73 F4); "" if there is none. The name is one a shell would
// assign, in any case: "MEMPALACE_edge=1" too (attack75 F5).
func secondAssignment(tok string) string {
	for i, f := range strings.Fields(tok) {
		if name, _, ok := strings.Cut(f, "="); ok && i > 0 && name != "" && (name[0] < '0' || name[0] > '9') &&
			strings.Trim(name, "_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
			return name
		}
	}
	return ""
}

// warnFunc adds a warning about variable v with its fix.
type warnFunc func(v, fix, format string, args ...any)

// checkReach warns of what keeps the mode s resolved to from reaching the
// primary or the local palace: the token (tok) unusable or missing, the
// local server or the edge's command not on PATH.
func checkReach(s Settings, tok string, lookPath LookPath, warn warnFunc) {
	if strings.IndexFunc(tok, unicode.IsControl) >= 0 {
		warn(EnvRemoteToken, "write the token alone after "+EnvRemoteToken+"= on one line, with no quotes around a line break and no \\n or \\r in it (the token `devbox-config gateway token issue DEVICE` or the primary's operator gave)",
			"holds a line break or another control character (not shown: it is the token), which no Authorization header can carry: every call to the primary will fail")
	}
	if name := secondAssignment(tok); name != "" {
		warn(EnvRemoteToken, "put "+name+"= on a line of its own in .env, with the token alone after "+EnvRemoteToken+"=, then recreate the container",
			"holds whitespace and then %s= (the rest not shown: it is the token): two assignments on one .env line? %s is then not set, and the token sent holds the rest of the line, which the primary refuses", name, name)
	}
	if s.Mode != Solitary && !s.TokenSet {
		warn(EnvRemoteToken, "set "+EnvRemoteToken+" in .env to this device's token (behind a devbox-config gateway: the one `devbox-config gateway token issue DEVICE` printed)",
			"empty while %s is set: the primary will answer 401 unless it runs without a token on loopback", EnvRemoteURL)
	}
	if s.Mode == Edge && !s.LocalServerFound {
		warn(EnvEdge, "install MemPalace in the image so "+LocalServer+" is on PATH (pip install mempalace), or set "+EnvEdge+"=0",
			"edge mode needs %s on PATH for the local palace; the edge will run degraded until it is installed", LocalServer)
	}
	if s.Mode == Edge {
		if _, err := lookPath(EdgeCommand); err != nil {
			warn(EnvEdge, "scripts/build /usr/local/bin/"+EdgeCommand+" (or install the release binary there)",
				"the harness will start %q, but %s is not on PATH: install it there (scripts/build /usr/local/bin/%s) or the harness cannot start the edge", EdgeCommand+" edge", EdgeCommand, EdgeCommand)
		}
	}
	if s.Mode == Solitary && !s.LocalServerFound {
		warn(LocalServer, "nothing, if this devbox is meant to run without MemPalace; else install it (pip install mempalace) so "+LocalServer+" is on PATH",
			"not on PATH: no mempalace entry is added where there is none, one render wrote is removed, any other stays as it is")
	}
}

// resolveIdentity reads who this devbox's writes are from into s: the
// agent's name and the origin's device and label, each ignored with a
// warning when it is not valid (a value repeated only when not the token,
// tok).
func resolveIdentity(s *Settings, get func(string) string, tok string, warn warnFunc) {
	if v := get(EnvAgentName); v != "" {
		if validName(v) {
			s.AgentName = v
		} else {
			s.AgentNameRefused = v
			warn(EnvAgentName, EnvAgentName+"=opencode (a name such as the harness's)", "%s is not a valid MemPalace agent name (letters, digits, _ . ' - and space, up to 128); ignored", shown(v, tok))
		}
	}
	if v := get(EnvOriginDevice); v != "" {
		if strings.ContainsFunc(v, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || invisible.Is(r) }) {
			warn(EnvOriginDevice, EnvOriginDevice+"=$(cat /proc/sys/kernel/random/uuid) (any opaque id without '/' or spaces)", "must be an opaque id without '/', white space or an invisible character (e.g. a uuid); ignored, nothing will be stamped")
		} else {
			s.OriginDevice = v
		}
	}
	// The label (LabelFault) carries no line break, invisible character
	// or second .env assignment.
	if v := get(EnvOriginLabel); v != "" {
		if why := LabelFault(v); why == "" {
			s.OriginLabel = v
		} else {
			s.OriginLabelRefused = v
			if redact.HoldsToken(v, tok) { // its characters would show the token's (attack88 F4)
				why = "holds a character a label may not hold"
			}
			warn(EnvOriginLabel, EnvOriginLabel+"=laptop (the device's label, as `devbox-config gateway device list` shows it)",
				"%s %s (%s); ignored: writes carry '-' as the label, and the agent's address is its bare name", shown(v, tok), why, LabelRule)
		}
	}
}

// parseBool accepts the spellings .env files use for the ladder's switches.
// Blank is false and valid.
func parseBool(v string) (value, ok bool) {
	switch strings.ToLower(v) {
	case "":
		return false, true
	case "1", "true":
		return true, true
	case "0", "false":
		return false, true
	}
	return false, false
}

// urlCheck is why a URL cannot be used and the fix ("" when it can).
type urlCheck struct{ problem, fix string }

func checkURL(raw, token string) urlCheck {
	// The token itself, anywhere: render would write it into every
	// harness config.
	if urlHoldsToken(raw, token) {
		return urlCheck{"carries the token itself: it would be written into every harness config",
			"remove it from " + EnvRemoteURL + " (the token goes in " + EnvRemoteToken + " only), and rotate it if a config with the URL ever left the machine"}
	}
	// Credentials are looked for before anything quotes the URL back.
	if hasCredentials(raw) {
		return urlCheck{"carries credentials in the URL (user:password@ or a token in the query): they would be written into every harness config",
			"remove them from " + EnvRemoteURL + ", put the token in " + EnvRemoteToken + ", and rotate it if a config with the URL ever left the machine"}
	}
	// Harnesses expand references anywhere in their configs: opencode
	// {env:NAME} and {file:path}, Gemini CLI and Qwen Code $VAR and ${VAR},
	// Claude Code ${VAR}, Crush $(command). Such a URL would send a
	// variable's value (the token), a file or a command's output to the
	// primary. None of these characters is needed in a URL: refuse them.
	if i := strings.IndexAny(raw, "{}$`"); i >= 0 {
		return urlCheck{fmt.Sprintf("contains %q, which a harness would expand in its config (opencode {env:...}, Gemini CLI and Qwen Code $VAR and ${VAR}, Claude Code ${VAR}, Crush $(...)): a variable's value, the token included, or a file's contents would go to the primary in the URL (a %q really meant is %%%02X)", expansionRef(raw[i:]), raw[i:i+1], raw[i]),
			"remove the reference (the token goes in " + EnvRemoteToken + ", never in the URL); percent-encode a character really meant: $ as %24, ` as %60, { as %7B, } as %7D"}
	}
	// Whitespace: no URL holds any, and a .env line with two assignments
	// ("...mcp MEMPALACE_REMOTE_TOKEN=...") puts the second in the URL.
	if strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return urlCheck{"holds whitespace or an invisible character (not repeated here: it may be two .env assignments on one line, a secret included)",
			"write the URL alone after " + EnvRemoteURL + "=, each variable on a line of its own (a space really meant is %20)"}
	}
	if !strings.Contains(raw, "://") {
		return urlCheck{"has no scheme (http:// or https://)", schemeFix(raw)}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return urlCheck{"not a valid URL", EnvRemoteURL + "=https://HOST/mcp (the primary's or its gateway's /mcp endpoint)"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return urlCheck{fmt.Sprintf("scheme %q is not http or https", u.Scheme), EnvRemoteURL + "=https://" + u.Host + u.Path}
	}
	if u.Host == "" {
		return urlCheck{"has no host", EnvRemoteURL + "=https://HOST/mcp (the primary's or its gateway's /mcp endpoint)"}
	}
	// A devbox-config gateway refuses a query parameter /mcp does not
	// take (none): every call would fail with 400.
	if u.RawQuery != "" || u.ForceQuery {
		return urlCheck{"has a query (not repeated here: it may hold a secret): a devbox-config gateway refuses every call to /mcp with one",
			EnvRemoteURL + "=" + u.Scheme + "://" + u.Host + u.Path}
	}
	return urlCheck{}
}

// urlHoldsToken: raw holds the token, or a device token's secret segment
// (the token without dbx_ holds it too), in any case, as it is or
// percent-decoded once or twice (a URL copied from a ?token= link),
// anywhere: path, ;param, query, fragment, user info. Not a token shorter
// than redact.MinTokenInText, which ordinary URLs contain by chance
// (doctor's weak-token says so).
func urlHoldsToken(raw, token string) bool {
	var needles []string
	if len(token) >= redact.MinTokenInText {
		needles = append(needles, strings.ToLower(token))
	}
	if s := deviceinfo.TokenSecret(token); len(s) >= redact.MinTokenInText {
		needles = append(needles, strings.ToLower(s))
	}
	text := strings.ToLower(raw)
	for range 3 {
		for _, n := range needles {
			if strings.Contains(text, n) {
				return true
			}
		}
		decoded, err := url.PathUnescape(text)
		if err != nil || decoded == text {
			// A malformed escape: url.Parse below refuses one in the
			// path, user info or fragment, and any query is refused.
			return false
		}
		text = decoded
	}
	return false
}

// schemeFix is the fix for a URL without a scheme (raw): the URL with
// http:// (loopback) or https:// in front.
func schemeFix(raw string) string {
	scheme := "https://"
	if isLoopback("http://" + raw) {
		scheme = "http://"
	}
	// Not repeated: a value with no '.', ':' or '/' (no host name, but
	// maybe a token in the wrong variable).
	if _, err := url.Parse(scheme + raw); err != nil || !strings.ContainsAny(raw, ".:/") {
		return EnvRemoteURL + "=" + scheme + "HOST/mcp (the primary's or its gateway's /mcp endpoint)"
	}
	// RedactURL: the fix repeats no query (it may hold a secret).
	return EnvRemoteURL + "=" + RedactURL(scheme+raw)
}

// hasCredentials: user info before the host, or a query parameter whose
// name says it is a secret (some deployments take keys in the query).
// expansionRef is the reference starting ref as a message quotes it: to
// its closing brace, parenthesis or backtick, or the end of a $NAME; never
// past whitespace, at most 60 bytes.
func expansionRef(ref string) string {
	closer := byte('}')
	switch {
	case strings.HasPrefix(ref, "$("):
		closer = ')'
	case ref[0] == '`':
		closer = '`'
	case ref[0] == '$' && !strings.HasPrefix(ref, "${"):
		name := strings.TrimLeftFunc(ref[1:], func(r rune) bool { return r == '_' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) })
		ref, closer = ref[:len(ref)-len(name)], 0
	}
	if j := strings.IndexByte(ref[1:], closer); closer != 0 && j >= 0 {
		ref = ref[:j+2]
	}
	// Nothing past whitespace (a second .env assignment may follow).
	if k := strings.IndexFunc(ref, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }); k >= 0 {
		ref = ref[:k] + "..."
	}
	if len(ref) > 60 {
		ref = ref[:60] + "..."
	}
	return ref
}

func hasCredentials(raw string) bool {
	rest := raw
	if _, after, ok := strings.Cut(raw, "://"); ok {
		rest = after
	}
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	if strings.Contains(authority, "@") {
		return true
	}
	_, query, ok := strings.Cut(raw, "?")
	if !ok {
		return false
	}
	query, _, _ = strings.Cut(query, "#")
	for _, kv := range strings.Split(query, "&") {
		k, _, _ := strings.Cut(kv, "=")
		k = strings.ToLower(k)
		for _, s := range []string{"token", "key", "secret", "password", "auth", "sig"} {
			if strings.Contains(k, s) {
				return true
			}
		}
	}
	return false
}

// Cleartext reports whether a bearer token sent to raw would cross the
// network unencrypted: raw is neither https:// nor loopback. render and the
// edge keep the rung with a warning (a docker0 address is sound on one
// host); doctor never sends the token there.
func Cleartext(raw string) bool { return !isHTTPS(raw) && !isLoopback(raw) }

// PrivateAddress reports whether raw names its host by a private address
// (RFC 1918, IPv6 unique local): the docker0 or a compose network's
// address the operator's set-up binds the primary to on one host, where
// doctor's token check is worth the clear text the harness and the edge
// send anyway. A name is not one (doctor does not resolve it to decide).
func PrivateAddress(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsPrivate()
}

func isHTTPS(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https"
}

func isLoopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// RedactURL is a URL as a message may show it: without user info, query
// (some deployments take keys there) and fragment.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the URL"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// Redirected is the error of an answer that redirects (nil for any
// other), for every transport that adds the token to requests to the
// primary (the edge's, the mailbox's, the bridge's): the http.Client
// would follow it with the token on, to wherever the Location names, so
// the answer is turned into this error instead and no request but the
// first is sent. It says where the primary pointed (redacted) and what to
// set, as doctor does; to another origin (host, scheme or port), where the
// token would go next, it says so and asks the user to check it first.
func Redirected(req *http.Request, resp *http.Response) error {
	if !IsRedirect(resp) {
		return nil
	}
	e := &RedirectError{Status: resp.StatusCode, To: UnparsedLocation}
	if u, err := req.URL.Parse(resp.Header.Get("Location")); err == nil {
		e.To = RedactURL(u.String()) // String escapes what is not ASCII: nothing raw reaches a terminal
		e.OtherOrigin = !sameOrigin(req.URL, u)
	}
	return e
}

// UnparsedLocation is RedirectError.To for a Location that does not
// parse (a control character in it): it is not shown.
const UnparsedLocation = "the URL"

// RedirectError is an answer that redirects, refused (Redirected): its
// status, where it pointed (redacted; "the URL" when its Location does
// not parse) and whether that is another origin. Its text is for a
// client of the primary; the gateway says its own (errors.As).
type RedirectError struct {
	Status      int
	To          string
	OtherOrigin bool
}

func (e *RedirectError) Error() string {
	if e.OtherOrigin {
		return fmt.Sprintf("the primary answered a redirect (HTTP %d) to %s, on another host, scheme or port: check it is your primary before pointing %s at it", e.Status, e.To, EnvRemoteURL)
	}
	return fmt.Sprintf("the primary answered a redirect (HTTP %d) to %s: set %s to the final URL", e.Status, e.To, EnvRemoteURL)
}

// IsRedirect is whether an http.Client would follow resp: a 301, 302,
// 303, 307 or 308 with a Location (it follows none without one, nor a
// 300 or 304).
func IsRedirect(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}

// RefuseRedirects is next with an answer that redirects turned into
// Redirected's error, its body closed unread, and an answer net/http
// could not read into Unreadable's: the transport under every client that
// adds the token to requests to the primary. It refuses in the transport,
// not in a CheckRedirect: the client parses a Location before any
// CheckRedirect, and its error for one that does not parse quoted the
// header, query and all.
func RefuseRedirects(next http.RoundTripper) http.RoundTripper { return refuseRedirects{next} }

type refuseRedirects struct{ next http.RoundTripper }

func (t refuseRedirects) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, Unreadable(err)
	}
	if err := Redirected(r, resp); err != nil {
		resp.Body.Close() // nothing of it is read
		return nil, err
	}
	return resp, nil
}

// Unreadable is err, from a round trip to the primary, with an answer
// net/http could not read as HTTP said without the line it could not
// read: its error quotes the line (a header with a control character in
// it, a Location whose query holds a token, terminal escapes). Any other
// error is returned as it is.
func Unreadable(err error) error {
	if pe := textproto.ProtocolError(""); errors.As(err, &pe) {
		return errors.New("the answer did not read as HTTP (a malformed header line, not shown)")
	}
	return err
}

// sameOrigin is whether a and b share scheme, host and port (a port left
// out is the scheme's).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		return cmp.Or(u.Port(), map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)])
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// MCPPath is raw with its path made /mcp when it has none, or has /mcp
// with a trailing slash or in other letters ("/mcp/", "/MCP"): "" when
// its path is /mcp or another, or it is no http URL. mempalace serve and
// the gateway answer MCP only on /mcp, while their /healthz answers
// beside it, so such a URL looks alive and every call is a 404.
func MCPPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	switch p := strings.TrimSuffix(u.Path, "/"); {
	case p == "":
		return strings.TrimSuffix(raw, "/") + "/mcp"
	case strings.EqualFold(p, "/mcp") && u.Path != "/mcp":
		u.Path, u.RawPath = "/mcp", ""
		return u.String()
	}
	return ""
}
