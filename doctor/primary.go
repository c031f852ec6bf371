package doctor

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/shellword"
)

// Probe is what doctor learnt from the primary.
type Probe struct {
	// Reached: /healthz answered 200.
	Reached bool
	// Healthz is /healthz's round trip.
	Healthz time.Duration
	// Tools are the names tools/list gave (nil when not reached).
	Tools []string
	// Gateway: the answer came from a devbox-config gateway (it advertises
	// its op-id ledger on every /mcp answer, refusals included).
	Gateway bool
	// Device is the device such a gateway names the token ("": none, or
	// not reached).
	Device string
}

// maxAnswer bounds what doctor reads of one answer.
const maxAnswer = 4 << 20

// newClient is a client for one run: no proxy from the environment (the
// harness talks to the URL itself), no redirects, every dial bounded.
func newClient(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	return &http.Client{Transport: ladder.RefuseRedirects(&http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: timeout, ResponseHeaderTimeout: timeout, DisableKeepAlives: true})}
}

// healthzURL is the primary's /healthz beside its /mcp endpoint.
func healthzURL(mcpURL string) (string, error) {
	u, err := url.Parse(mcpURL)
	if err != nil {
		return "", err
	}
	p := strings.TrimSuffix(u.Path, "/")
	if strings.EqualFold(path.Base(p), "mcp") { // "/MCP" too: ladder.MCPPath names the fix
		p = path.Dir(p)
	}
	u.Path, u.RawPath = strings.TrimSuffix(p, "/")+"/healthz", ""
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// urlPath says what path raw has, for a finding: "has no path" or
// "has the path \"/MCP\"".
func urlPath(raw string) string {
	if u, err := url.Parse(raw); err == nil && strings.Trim(u.Path, "/") != "" {
		return fmt.Sprintf("has the path %q", u.EscapedPath())
	}
	return "has no path"
}

// CheckPrimary is primary-unreachable, primary-auth, host-pin,
// origin-header and sync-shared (§6.2, §7.2), in remote and edge modes
// only (solitary makes no network call, R1). All of it shares one
// deadline, Options.Timeout.
func CheckPrimary(ctx context.Context, opts Options, st State) (Probe, []Finding) {
	var p Probe
	s := st.Settings
	if s.Mode == ladder.Solitary || s.URL == "" {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	client := newClient(opts.Timeout)
	hz, err := healthzURL(s.URL)
	if err != nil {
		return p, nil // the ladder already refused such a URL
	}
	shown := opts.mask(ladder.RedactURL(hz)) // the URL may embed the token

	start := time.Now()
	hzr, err := get(ctx, client, hz, "")
	p.Healthz = time.Since(start)
	if err != nil {
		return p, []Finding{unreachable(opts, shown, err)}
	}
	switch status := hzr.status; {
	case status == http.StatusOK:
	case hzr.gateway && status != http.StatusForbidden:
		return p, []Finding{gatewayUpstream(opts.mask(ladder.RedactURL(s.URL)), fmt.Sprintf("its /healthz answered HTTP %d (%s): the primary behind it is stopped, hung or unreachable from the gateway", status, opts.mask(hzr.body)))}
	case status == http.StatusForbidden:
		// No Origin was sent, so this is the Host pin, unless a proxy adds
		// an Origin: one that carries a loopback Origin through passes then.
		if r2, err := get(ctx, client, hz, "http://localhost"); err == nil && r2.status == http.StatusOK {
			return p, []Finding{{ID: IDOriginHeader, Severity: Error, Section: "§6.2",
				Message: fmt.Sprintf("%s answers 403 unless the request carries a loopback Origin: something in the path (a proxy, a browser-based client) adds a non-loopback Origin header, which MemPalace refuses with no override", shown),
				Fix:     "stop the proxy from adding Origin (e.g. nginx `proxy_set_header Origin \"\";`, Pangolin/newt: no header rewrite) and keep browser-based clients out of the path"}}
		}
		return p, []Finding{{ID: IDHostPin, Severity: Error, Section: "§6.2",
			Message: fmt.Sprintf("%s answers 403 to a plain request: the primary is bound to loopback, which pins the Host header, and a proxy or tunnel forwards it another Host", shown),
			Fix:     "bind the docker0 address instead of loopback (`mempalace serve --host 172.17.0.1`, with a token): non-loopback relaxes the pin, yet only the host and its containers reach it; or list the proxy's name in MEMPALACE_MCP_EXTRA_ALLOWED_HOSTS (3.7+)"}}
	default:
		return p, []Finding{{ID: IDPrimaryUnreachable, Severity: Error, Section: "§6.2",
			Message: fmt.Sprintf("%s answered HTTP %d, not 200 ok: this is not a MemPalace primary's /mcp endpoint, or it is failing", shown, status),
			Fix:     "check MEMPALACE_REMOTE_URL (it ends in /mcp) and the primary's log (`docker compose logs` in the compose project that runs the primary on its host: " + primaryCompose + ")"}}
	}
	p.Reached = true
	var out []Finding
	if p.Healthz > opts.SlowPrimary {
		out = append(out, Finding{ID: IDPrimaryUnreachable, Severity: Warn, Section: "§6.2",
			Message: fmt.Sprintf("%s took %s to answer (more than %s): every remote call pays that, and the primary serves one request at a time (§7.5)", shown, p.Healthz.Round(time.Millisecond), opts.SlowPrimary),
			Fix:     "check the tunnel and the primary's load; edge mode (MEMPALACE_EDGE=1) keeps reads local when the primary is slow"})
	}

	if tok := opts.token(); tok != "" && (ladder.Cleartext(s.URL) && !ladder.PrivateAddress(s.URL) || strings.IndexFunc(tok, unicode.IsControl) >= 0) {
		// never sent over plain http to a public address or a name, nor one
		// no header carries: CheckEnv's finding says so (attack88 F2, F6);
		// a private one is the docker0 set-up's (review28 O2)
		return p, out
	}
	return p, append(out, checkTools(ctx, opts, st, client, &p)...)
}

// DiagnosePrimary is CheckPrimary for a command that could not read the
// primary at s.URL with the token env gives (the mailbox): the first
// error it finds, whose Fix names what to change (a refused token, a URL
// without /mcp, a primary that is not there), within timeout. false: it
// finds nothing wrong.
func DiagnosePrimary(ctx context.Context, env ladder.Lookup, s ladder.Settings, timeout time.Duration) (Finding, bool) {
	if s.Mode == ladder.Solitary {
		s.Mode = ladder.Remote // the caller reads the primary whatever the rung
	}
	_, fs := CheckPrimary(ctx, Options{Env: env, Timeout: timeout, SlowPrimary: timeout}, State{Settings: s})
	for _, f := range fs {
		if f.Severity == Error {
			return f, true
		}
	}
	return Finding{}, false
}

// checkTools is the authenticated half of CheckPrimary: tools/list with
// the token. Behind a devbox-config gateway (it advertises itself on every
// /mcp answer) a refusal is about the device's own token, and a 502 or 503
// about the gateway's upstream.
func checkTools(ctx context.Context, opts Options, st State, client *http.Client, p *Probe) []Finding {
	s := st.Settings
	c := mcpClient{client: client, url: s.URL, token: opts.token()}
	tools, status, err := c.listTools(ctx)
	p.Gateway = c.gateway
	at := opts.mask(ladder.RedactURL(s.URL))
	switch {
	case err != nil:
		return []Finding{unreachable(opts, at, err)}
	case status == http.StatusUnauthorized:
		return []Finding{authFinding(at, s.TokenSet, c.gateway, deviceinfo.IsDeviceToken(c.token))}
	case c.gateway && (status == http.StatusBadGateway || status == http.StatusServiceUnavailable):
		return []Finding{gatewayUpstream(at, "it accepted this device's token, but the primary behind it failed: "+opts.mask(c.refusal))}
	case status != http.StatusOK && ladder.MCPPath(s.URL) != "":
		return []Finding{{ID: IDPrimaryUnreachable, Severity: Error, Section: "§6.2",
			Message: fmt.Sprintf("%s answered HTTP %d to an authenticated tools/list: %s %s, and mempalace serve and the gateway answer MCP only on /mcp, lower case with no trailing slash (their /healthz answers beside it)", at, status, ladder.EnvRemoteURL, urlPath(s.URL)),
			Fix:     fmt.Sprintf("set %s=%s in .env (the harness configs follow at the next render)", ladder.EnvRemoteURL, opts.mask(ladder.RedactURL(ladder.MCPPath(s.URL))))}}
	case status != http.StatusOK:
		return []Finding{{ID: IDPrimaryUnreachable, Severity: Error, Section: "§6.2",
			Message: fmt.Sprintf("%s answered HTTP %d to an authenticated tools/list", at, status),
			Fix:     "check MEMPALACE_REMOTE_URL and the primary's log"}}
	}
	p.Tools, p.Device = tools, c.device.ID
	out := identityMismatch(s, c.device, opts.EnvFiles)
	// A gateway that refuses sync says so in its initialize answer; one
	// that does not (before issue 27) lets an admin device's sync through.
	if s.Mode == ladder.Remote && slices.Contains(tools, "mempalace_sync") && !c.device.Refused("sync") {
		out = append(out, Finding{ID: IDSyncShared, Severity: Warn, Section: "§7.2",
			Message: "in remote mode the agent can call mempalace_sync directly on the shared primary, which prunes drawers whose sources are absent on the primary's host: a sync from one device can delete another's",
			Fix:     "use edge mode (MEMPALACE_EDGE=1: the edge never sends mempalace_sync to the primary) or put `devbox-config gateway` in front of the primary (it refuses sync for every device)"})
	}
	return out
}

// identityMismatch is device-identity: MEMPALACE_ORIGIN_DEVICE, _LABEL
// and <AGENT_NAME>@<label> against the device a gateway says the token is
// (nothing from a bare primary, nor for a variable left unset). With
// another device's identity the edge stamps writes as one device while
// the gateway holds them to another, and an agent that is not one of the
// device's cannot see the asks addressed to it (the mailbox says the
// same). An agent name with MEMPALACE_ORIGIN_LABEL unset is the bare name
// (ladder.EdgeSettings.NoLabel), and the finding names the line to add.
// Each wrong value is named with where it was read (envLine: a line of
// files, else the environment), and the fix names only those (attack84
// F4: it blamed .env when none was read, and said to set what was right).
func identityMismatch(s ladder.Settings, dev deviceinfo.Info, files []string) []Finding {
	if dev.ID == "" {
		return nil
	}
	var wrong, fix []string
	if s.OriginDevice != "" && s.OriginDevice != dev.ID {
		at := envLine(files, ladder.EnvOriginDevice, s.OriginDevice)
		wrong = append(wrong, fmt.Sprintf("%s=%s (%s) is not %s", ladder.EnvOriginDevice, mailbox.Quoted(s.OriginDevice), at, dev.ID))
		fix = append(fix, fmt.Sprintf("%s=%s in %s", ladder.EnvOriginDevice, dev.ID, at))
	}
	if s.OriginLabel != "" && dev.Label != "" && s.OriginLabel != dev.Label {
		at := envLine(files, ladder.EnvOriginLabel, s.OriginLabel)
		wrong = append(wrong, fmt.Sprintf("%s=%s (%s) is not %q", ladder.EnvOriginLabel, mailbox.Quoted(s.OriginLabel), at, dev.Label))
		fix = append(fix, fmt.Sprintf("%s=%s in %s", ladder.EnvOriginLabel, shellword.Quote(dev.Label), at))
	}
	agents := strings.Join(dev.Agents, ", ")
	if agents == "" {
		agents = "none; the operator gives them with `gateway device set --agents`"
	}
	if id := s.AgentName + "@" + s.OriginLabel; s.AgentName != "" && s.OriginLabel != "" && !dev.Coordinator && !slices.Contains(dev.Agents, id) {
		at := envLine(files, ladder.EnvAgentName, s.AgentName)
		wrong = append(wrong, fmt.Sprintf("%s=%s (%s): %s is not one of the device's agents (%s): asks addressed to it cannot be seen through this token", ladder.EnvAgentName, mailbox.Quoted(s.AgentName), at, mailbox.Quoted(id), agents))
		if !slices.Contains(dev.Agents, s.AgentName+"@"+dev.Label) { // not right once the label is
			fix = append(fix, fmt.Sprintf("%s in %s to an agent of the device", ladder.EnvAgentName, at))
		}
	}
	if w := (ladder.EdgeSettings{Settings: s}).NoLabel(dev.Label); w != "" {
		if !dev.Coordinator && !slices.Contains(dev.Agents, s.AgentName) {
			w += fmt.Sprintf(" (%s is not one of the device's agents: no ask to it can be seen, and the edge refuses its coordination writes)", mailbox.Quoted(s.AgentName))
		}
		wrong = append(wrong, w)
		label := "<the device's label>"
		if dev.Label != "" {
			label = shellword.Quote(dev.Label)
		}
		fix = append(fix, ladder.EnvOriginLabel+"="+label)
	}
	if len(wrong) == 0 {
		return nil
	}
	return []Finding{{ID: IDDeviceIdentity, Severity: Warn, Section: "§6.2",
		Message: fmt.Sprintf("the gateway says this token is device %s (label %q, agents: %s), but this devbox's settings say otherwise: %s", dev.ID, dev.Label, agents, strings.Join(wrong, "; ")),
		Fix:     fmt.Sprintf("set %s; or, if this devbox is another device, put that device's own token in %s", strings.Join(fix, "; "), ladder.EnvRemoteToken) + agentsFix(s, dev)}}
}

// agentsFix is the gateway-side part of device-identity's fix when no
// agent of dev is one a session can be (<name>@<the device's label>): no
// .env line can make the session one of them; "" otherwise.
func agentsFix(s ladder.Settings, dev deviceinfo.Info) string {
	if dev.Coordinator || (dev.Label != "" && slices.ContainsFunc(dev.Agents, func(a string) bool { return strings.HasSuffix(a, "@"+dev.Label) })) {
		return ""
	}
	name, label := cmp.Or(s.AgentName, "NAME"), cmp.Or(dev.Label, "LABEL")
	return fmt.Sprintf("; no agent of the device is one a session can be (<name>@<its label>), so the fix is on the gateway: its operator runs `devbox-config gateway device set %s --label %s --agents %s`", dev.ID, shellword.Quote(label), shellword.Quote(name+"@"+label))
}

// queuedAsAnother makes device-identity an error while the outbox holds
// writes queued as another device than the one the gateway names the
// token (dev): the flusher holds them, unsent, until the user retries
// them (sent as dev) or drops them. fs are the primary's findings; one
// device-identity among them is the one raised.
func queuedAsAnother(fs []Finding, ob outboxState, dev string) []Finding {
	var others []string
	n, before := 0, 0
	for d, c := range ob.stats.QueuedAs {
		if d != dev {
			others, n, before = append(others, d), n+c, before+ob.stats.QueuedBeforeCopy[d]
		}
	}
	if dev == "" || n == 0 {
		return fs
	}
	slices.Sort(others)
	msg := fmt.Sprintf("%d write(s) in %s were queued as device %s, and the gateway names this token %s: they are held, never sent as %s unless you say so (the device was removed, .env holds another device's token, or this devbox, or a copy of it, took a device id of its own)", n, ob.path, strings.Join(others, ", "), dev, dev)
	fix := "`devbox-config edge outbox list` lists them (the edge, or `edge flush`, holds each: dead, other-device) and says whose each is; " + whoseFix(ob.stats.QueuedBeforeCopy != nil, n, before, dev)
	for i, f := range fs {
		if f.ID == IDDeviceIdentity {
			fs[i].Severity, fs[i].Message, fs[i].Fix = Error, f.Message+"; "+msg, f.Fix+"; "+fix
			return fs
		}
	}
	return append(fs, Finding{ID: IDDeviceIdentity, Severity: Error, Section: "§6.2", Message: msg, Fix: fix})
}

// whoseFix is queuedAsAnother's fix for n writes held as queued under
// another device than dev, before of them queued before the outbox was
// copied (known: the outbox records when it was, so it can tell).
func whoseFix(known bool, n, before int, dev string) string {
	drop := "`devbox-config edge outbox drop ID` those (the original machine holds them too and sends them as its own device; a plain retry from here would file each twice, and is refused); if the original machine is gone for good and never sent them: `devbox-config edge outbox retry --force ID`"
	retry := fmt.Sprintf("`devbox-config edge outbox retry ID` sends one as %s", dev)
	switch {
	case known && before == n:
		return fmt.Sprintf("all %d were queued before this outbox was copied: %s", n, drop)
	case known && before == 0:
		return fmt.Sprintf("all %d were written on this machine after its outbox was copied: %s", n, retry)
	case known:
		return fmt.Sprintf("%d were queued before this outbox was copied: %s; the other %d this machine wrote after the copy: %s", before, drop, n-before, retry)
	}
	return fmt.Sprintf("whose they are cannot be told here (no copy of this outbox is recorded; a disk-level clone is not seen): if this outbox was copied from a machine still in use, that machine sends them: `devbox-config edge outbox drop ID` (a retry files each twice); if this devbox was renamed (a new device id or token in .env), or the machine it was copied from is gone for good and never sent them: `devbox-config edge outbox retry ID` sends one as %s; a lost or compromised device's writes: drop them", dev)
}

// gatewayUpstream is gateway-upstream: a devbox-config gateway answered
// (at is its URL), and what failed behind it (why).
func gatewayUpstream(at, why string) Finding {
	return Finding{ID: IDGatewayUpstream, Severity: Error, Section: "§6.2",
		Message: fmt.Sprintf("%s is a devbox-config gateway: %s", at, why),
		Fix:     "on the gateway's host (nothing in this devbox's .env changes): if the primary is stopped or hung, start (or restart) it (" + primaryCompose + ") and check the gateway's --upstream; if the upstream refused the gateway's token, set MEMPALACE_UPSTREAM_TOKEN in the gateway's environment (or upstream_token_file in its config) to the primary's token and restart the gateway; in edge mode writes wait in the outbox meanwhile"}
}

// authFinding is primary-auth: a 401 to tools/list. Behind a gateway the
// fix is the device's own token; only a bare primary wants its shared one,
// and a bare primary sent a gateway's device token (deviceToken) is the
// wrong URL: the device's .env never gets the shared one.
func authFinding(at string, tokenSet, behindGateway, deviceToken bool) Finding {
	f := Finding{ID: IDPrimaryAuth, Severity: Error, Section: "§6.2",
		Fix: "put the primary's token (its MEMPALACE_MCP_HTTP_TOKEN, or ~/.mempalace/server/<hash>/token on the primary) in .env as " + ladder.EnvRemoteToken + " and recreate the container"}
	who := "the primary"
	switch {
	case behindGateway:
		who, f.Fix = "the devbox-config gateway", gatewayTokenFix
	case deviceToken:
		f.Message = fmt.Sprintf("%s answered 401 to tools/list and is not a devbox-config gateway, but %s is a gateway's device token (%s_..., as `devbox-config gateway token issue` prints): %s likely points past the gateway at the primary behind it", at, ladder.EnvRemoteToken, deviceinfo.TokenPrefix, ladder.EnvRemoteURL)
		f.Fix = fmt.Sprintf("set %s to the gateway's /mcp URL (the one its operator gave, e.g. http://GATEWAY-HOST:PORT/mcp) in .env and recreate the container; keep the device token, and never put the primary's shared token in a device's .env: it stays on the gateway's host", ladder.EnvRemoteURL)
		return f
	}
	if tokenSet {
		f.Message = fmt.Sprintf("%s answered 401 to tools/list with %s: %s does not accept this token (revoked, expired, mistyped, or not one it issued)", at, ladder.EnvRemoteToken, who)
	} else {
		f.Message = fmt.Sprintf("%s answered 401 to tools/list: %s requires a token and %s is empty", at, who, ladder.EnvRemoteToken)
	}
	return f
}

// primaryCompose names the compose file that runs a primary in this
// repository, for the fix texts (the devbox cannot see the primary's host).
const primaryCompose = "in the devbox-config repository, examples/docker-compose.mempalace-gateway.yml runs one as service mempalace"

func unreachable(opts Options, shown string, err error) Finding {
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return Unanswered(shown, opts.Timeout, "devbox-config doctor")
	}
	return Finding{ID: IDPrimaryUnreachable, Severity: Error, Section: "§6.2",
		Message: fmt.Sprintf("cannot reach %s: %s", shown, opts.mask(err.Error())), // the client's error quotes the server
		Fix:     reachFix}
}

// Unanswered is primary-unreachable for a primary at shown (its URL,
// redacted) that gave no answer within timeout, for a command that waited
// on it: said from that wait, without asking again (which would double
// it). command is what gives it longer with --timeout.
func Unanswered(shown string, timeout time.Duration, command string) Finding {
	return Finding{ID: IDPrimaryUnreachable, Severity: Error, Section: "§6.2",
		Message: fmt.Sprintf("cannot reach %s: no answer within %s", shown, timeout),
		Fix:     fmt.Sprintf("%s; if it is only slow, `%s --timeout %s` gives it longer", reachFix, command, 4*timeout)}
}

// reachFix is primary-unreachable's fix.
const reachFix = "check that the primary runs (`docker compose ps` in the compose project that runs it on its host: " + primaryCompose + "), MEMPALACE_REMOTE_URL, and the tunnel; in edge mode writes wait in the outbox meanwhile"

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// reply is what a GET answered: its status, whether a devbox-config
// gateway answered it (it advertises itself), and the start of its body.
type reply struct {
	status  int
	gateway bool
	body    string
}

// maxQuoted bounds how much of an answer's body a finding quotes.
const maxQuoted = 200

// get is a GET that reads the body (quoting its start); origin "" sends
// none.
func get(ctx context.Context, c *http.Client, u, origin string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return reply{}, err
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxQuoted))
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	return reply{status: resp.StatusCode, gateway: ledger.Advertised(resp.Header), body: strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))}, nil
}

// mcpClient speaks just enough MCP over HTTP: POSTs of one JSON-RPC
// message, JSON (or a single SSE event) back, an Mcp-Session-Id carried
// when the server issues one (the official-SDK fork).
type mcpClient struct {
	client  *http.Client
	url     string
	token   string
	session string
	// gateway: an answer carried a devbox-config gateway's advertisement
	// (its op-id ledger's header, on every /mcp answer, refusals too).
	gateway bool
	// refusal is the JSON-RPC error message of the last non-200 answer.
	refusal string
	// device is what a devbox-config gateway's initialize says of this
	// device (zero from a bare primary).
	device deviceinfo.Info
}

func (c *mcpClient) post(ctx context.Context, msg any) (int, []byte, error) {
	body, _ := json.Marshal(msg)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		c.session = id
	}
	c.gateway = c.gateway || ledger.Advertised(resp.Header)
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b = firstSSEData(b)
	}
	return resp.StatusCode, b, nil
}

func firstSSEData(b []byte) []byte {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), maxAnswer)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			return []byte(strings.TrimSpace(d))
		}
	}
	return nil
}

// call is one JSON-RPC request: its HTTP status and its result.
func (c *mcpClient) call(ctx context.Context, id int, method string, params any) (int, json.RawMessage, error) {
	status, b, err := c.post(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return status, nil, err
	}
	if status != http.StatusOK {
		var answer struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(b, &answer) == nil { // not JSON-RPC: no message to quote
			c.refusal = answer.Error.Message
		}
		return status, nil, nil
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return status, nil, fmt.Errorf("%s: the answer is not JSON-RPC: %w", method, err)
	}
	if resp.Error != nil {
		return status, nil, fmt.Errorf("%s: error %d %s", method, resp.Error.Code, resp.Error.Message)
	}
	return status, resp.Result, nil
}

// listTools initializes (so a session-issuing server has a session) and
// lists the tools.
func (c *mcpClient) listTools(ctx context.Context) ([]string, int, error) {
	status, init, err := c.call(ctx, 1, "initialize", map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "devbox-config-doctor", "version": "1"},
	})
	if err != nil || status != http.StatusOK {
		return nil, status, err
	}
	c.device, _ = deviceinfo.FromInitialize(init) // absent: a bare primary
	if c.session != "" {
		c.post(ctx, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	}
	status, res, err := c.call(ctx, 2, "tools/list", map[string]any{})
	if err != nil || status != http.StatusOK {
		return nil, status, err
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		return nil, status, fmt.Errorf("tools/list: %w", err)
	}
	names := make([]string, 0, len(list.Tools))
	for _, t := range list.Tools {
		names = append(names, t.Name)
	}
	return names, status, nil
}
