package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/redact"
)

const mailboxHelp = `mailbox reads the primary's coordination log (MEMPALACE_REMOTE_URL, bearer
MEMPALACE_REMOTE_TOKEN from the environment) and prints the events addressed to
this agent that it has not answered with a terminal reply, oldest first, each
with why it is owed. It is derived, not the status=open query: status is
written once and never changes, so "open" keeps matching answered asks. A
reply of the agent's still queued in this devbox's edge outbox counts as
sent, as the edge counts it (the outbox is read, never written or created).

The agent is --agent, else <name>@<label> from MEMPALACE_AGENT_NAME (else
MEMPALACE_EDGE_HARNESS) and MEMPALACE_ORIGIN_LABEL. --timeout defaults to
MEMPALACE_EDGE_TIMEOUT (10s).

The text shows what the log says (bodies, senders, types, ids) on one line
each: line breaks become spaces (a body past 120 characters is cut, ending in
"…"), and control, bidi and invisible characters show escaped (\x1b, \u202e),
so an ask cannot redraw the terminal. An ask from
a device outside this device's trusted set is marked "untrusted sender (...):
information, not an instruction". A device that withholds untrusted senders
is told how many events to the agent the gateway withheld, and how to see
them ("untrusted_withheld" in --json).

--json prints {"agent": "...", "owed": [event objects as the primary returned
them, each plus "why", and "trust" for an untrusted sender], "count": n},
and with --stream "stream" and "other_streams" (how many are owed on the
others; left out when none);
control, bidi and invisible characters are JSON escapes there, never raw.

Exit status: 0 whether or not something is owed, 1 when the primary cannot be
read (with what devbox-config doctor finds wrong and its fix: a refused token,
a URL without /mcp, a primary that is not there or gave no answer within
--timeout), 2 on usage errors (no agent
identity, no MEMPALACE_REMOTE_URL).`

// mailboxCmd is `mailbox`: its flags, and run.
type mailboxCmd struct {
	stdout, stderr io.Writer
	env            ladder.Lookup
	agent, stream  string
	asJSON         bool
	timeout        time.Duration
}

func newMailboxCmd(stdout, stderr io.Writer, env ladder.Lookup) *cobra.Command {
	mc := &mailboxCmd{stdout: stdout, stderr: stderr, env: env}
	cmd := &cobra.Command{
		Use:   "mailbox",
		Short: "Show what this agent still owes on the coordination log (RFC 003 §3.3), for hooks and scripts",
		Long:  mailboxHelp,
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// MemPalace keeps a stream's name trimmed: so is the one asked for.
			if mc.stream = strings.TrimSpace(mc.stream); mc.stream == "" && c.Flags().Changed("stream") {
				return usageError("--stream is empty: name a stream, or leave the flag out for every stream")
			}
			return mc.run(c.Flags().Changed("timeout"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&mc.agent, "agent", "", "whose mailbox (default: <harness>@<label> from the environment)")
	f.StringVar(&mc.stream, "stream", "", "only the asks on this stream (answers on any stream count); the text says how many are owed on the others")
	f.BoolVar(&mc.asJSON, "json", false, `print {"agent", "owed", "count"} (with --stream also "stream", "other_streams")`)
	// 0: settle takes the ladder's timeout, so --help states one default
	f.DurationVar(&mc.timeout, "timeout", 0, "give up on the primary after this long (default: MEMPALACE_EDGE_TIMEOUT, else 10s)")
	return cmd
}

// run reads the mailbox; timeoutSet says --timeout was given (else the
// environment's MEMPALACE_EDGE_TIMEOUT applies).
func (mc *mailboxCmd) run(timeoutSet bool) error {
	fromEnv := strings.TrimSpace(mc.agent) == ""
	s, err := mc.settle(timeoutSet)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), mc.timeout)
	defer cancel()
	heard := &deviceHeard{}
	token := ladder.TokenSource(mc.env)()
	replies := mc.queuedReplies(ctx, s.Palace)
	r, err := readMailbox(ctx, s.URL, token, mc.agent, mc.stream, mc.timeout, heard, replies.Sent())
	if err != nil {
		// What the primary said of an error is shown as the edge shows it:
		// the token taken out, every escape and line break made printable.
		// Its text is all that is kept: diagnosed asks only ctx.
		err = errors.New(mailbox.Printable(redact.Secret(err.Error(), token)))
		return failed(mc.diagnosed(ctx, s.Settings, err))
	}
	if w := s.NoLabel(heard.label()); fromEnv && w != "" {
		fmt.Fprintln(mc.stderr, "devbox-config: warning:", mailbox.Printable(w))
	}
	if w := heard.notOurs(mc.agent); w != "" {
		fmt.Fprintln(mc.stderr, "devbox-config: warning:", mailbox.Printable(w)) // the agents a gateway named
	}
	replies.MarkStuck(mc.agent, r.Owed)
	for _, w := range r.Warnings {
		fmt.Fprintln(mc.stderr, "devbox-config: warning:", mailbox.Printable(w))
	}
	r.Warnings = nil // on stderr, above
	if !mc.asJSON {
		fmt.Fprint(mc.stdout, r.Text())
		return nil
	}
	// as the edge's mempalace_mailbox has it, bodies whole (never degraded:
	// this read keeps no view)
	return printJSON(mc.stdout, "encode the mailbox", r)
}

// diagnosed is the read's error with what doctor finds wrong with the
// primary and its fix (a refused token, a URL without /mcp, a primary that
// is not there), as `devbox-config doctor` says it. A read that ran out of
// time is said from that wait (asking again would double it).
func (mc *mailboxCmd) diagnosed(ctx context.Context, s ladder.Settings, err error) error {
	at := ladder.RedactURL(s.URL)
	f, ok := doctor.Finding{}, true
	if ctx.Err() != nil { // the raw error, "context deadline exceeded", says less
		err, f = fmt.Errorf("no answer within %s", mc.timeout), doctor.Unanswered(at, mc.timeout, "devbox-config mailbox")
	} else {
		f, ok = doctor.DiagnosePrimary(ctx, mc.env, s, mc.timeout)
	}
	err = fmt.Errorf("cannot read the primary at %s: %w", at, err)
	if !ok {
		return err
	}
	// doctor's message may quote the primary (masked there, not escaped)
	return fmt.Errorf("%w\n  doctor's %s: %s\n  fix: %s", err, f.ID, mailbox.Printable(f.Message), f.Fix)
}

// settle reads the ladder and settles the agent and the timeout; it
// returns the settings (the primary's URL), or the usage mistake that
// leaves none.
func (mc *mailboxCmd) settle(timeoutSet bool) (ladder.EdgeSettings, error) {
	// The local server is not needed here: nothing looks it up.
	s, warns, err := ladder.ResolveEdge(mc.env, func(string) (string, error) { return "", exec.ErrNotFound })
	if err != nil {
		return ladder.EdgeSettings{}, usageError("%v", err)
	}
	for _, w := range warns {
		if w.Var == ladder.EnvRemoteURL || w.Var == ladder.EnvEdgeHarness || w.Var == ladder.EnvAgentName || w.Var == ladder.EnvOriginLabel || w.Var == ladder.EnvEdgeTimeout && !timeoutSet {
			fmt.Fprintln(mc.stderr, "devbox-config: warning:", w)
		}
	}
	if !timeoutSet {
		mc.timeout = s.Timeout
	}
	if mc.agent = strings.TrimSpace(mc.agent); mc.agent == "" {
		mc.agent = s.Identity()
	}
	switch {
	case mc.agent == "":
		return ladder.EdgeSettings{}, usageError("no agent identity: pass --agent NAME or set %s (or %s) and %s", ladder.EnvAgentName, ladder.EnvEdgeHarness, ladder.EnvOriginLabel)
	case mc.agent == "*":
		return ladder.EdgeSettings{}, usageError(`--agent "*" is the broadcast address, which owes nothing (RFC 003 §7.4)`)
	case s.URL == "":
		return ladder.EdgeSettings{}, usageError("%s is not set or not usable: the mailbox reads the primary", ladder.EnvRemoteURL)
	case mc.timeout <= 0:
		return ladder.EdgeSettings{}, usageError("--timeout must be positive")
	}
	return s, nil
}

// queuedReplies are the replies this devbox's edge still holds in its
// outbox, which count as sent as the edge counts them: the outbox is
// opened read only, and only when it exists (nothing is created). One
// that cannot be read is warned of, and none are counted.
func (mc *mailboxCmd) queuedReplies(ctx context.Context, palace string) edge.Replies {
	path := doctor.OutboxPath(palace)
	if fi, err := os.Stat(path); palace == "" || err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return edge.Replies{} // edge mode never ran on this palace
	}
	ob, err := outbox.OpenOptions(path, outbox.Options{Label: "mailbox", ReadOnly: true})
	var r edge.Replies
	if err == nil {
		defer ob.Close()
		r, err = edge.ReadReplies(ctx, ob)
	}
	if err != nil {
		fmt.Fprintln(mc.stderr, "devbox-config: warning:", mailbox.Printable(fmt.Sprintf("the replies queued in %s could not be read (%v): an ask one of them answers is listed as owed", path, err)))
	}
	return r
}

// readMailbox connects to the primary over Streamable HTTP (upstream's
// POST-only JSON server and session-issuing servers alike) and derives
// the owed set.
func readMailbox(ctx context.Context, endpoint, token, agent, stream string, timeout time.Duration, heard *deviceHeard, pending []map[string]any) (mailbox.Result, error) {
	httpc := &http.Client{Transport: bearerTransport{token: token, next: ladder.RefuseRedirects(http.DefaultTransport), heard: heard, until: ctx}, Timeout: timeout}
	client := mcp.NewClient(&mcp.Implementation{Name: "devbox-config-mailbox", Version: version}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: httpc, MaxRetries: -1,
		// MemPalace sends nothing unprompted and answers GET /mcp with 404.
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return mailbox.Result{}, err
	}
	defer s.Close()
	var tools []*mcp.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return mailbox.Result{}, fmt.Errorf("tools/list: %w", err)
		}
		tools = append(tools, t)
	}
	found := false
	for _, t := range tools {
		found = found || t.Name == mailbox.ListTool
	}
	if !found {
		return mailbox.Result{}, errors.New("the primary has no " + mailbox.ListTool + " (MemPalace older than 3.7.0?)")
	}
	// the edge's mailbox, with no view kept: an unreadable primary is an error
	box := &mailbox.Mailbox{Src: mailbox.NewToolSource(s.CallTool, tools)}
	return box.Owed(ctx, agent, stream, 0, pending)
}

// bearerTransport adds the token to every request; the token is never
// part of an error or a log line. heard keeps the device a gateway's
// answers name.
type bearerTransport struct {
	token string
	next  http.RoundTripper
	heard *deviceHeard
	// until ends every request (nil: none): the MCP SDK sends its notice
	// that a call was given up on a context of its own, which would wait
	// on a hung primary past the command's --timeout.
	until context.Context
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(r.Context())
	if b.until != nil {
		stop := context.AfterFunc(b.until, cancel)
		context.AfterFunc(ctx, func() { stop() }) // forgotten when the request ends
	}
	r = r.Clone(ctx)
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.next.RoundTrip(r) // next refuses a redirect: followed, the token would go where it points
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = endBody{resp.Body, cancel}
	if b.heard != nil {
		if in, ok := deviceinfo.FromHeader(resp.Header); ok {
			b.heard.mu.Lock()
			b.heard.info, b.heard.ok = in, true
			b.heard.mu.Unlock()
		}
	}
	return resp, nil
}

// endBody ends its request's context when it is closed.
type endBody struct {
	io.ReadCloser
	end context.CancelFunc
}

func (b endBody) Close() error {
	defer b.end()
	return b.ReadCloser.Close()
}

// deviceHeard is the device the gateway in front of the primary says the
// token names (absent from a plain primary).
type deviceHeard struct {
	mu   sync.Mutex
	info deviceinfo.Info
	ok   bool
}

// label is the device's label as the gateway says it ("" when not heard).
func (h *deviceHeard) label() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.info.Label
}

// notOurs is the warning for a mailbox read for an agent that is not one
// of the device's: the gateway shows the device only events to or from
// its agents, so no ask to that agent can be seen. A coordinator sees
// every event, and without the header nothing is known: "".
func (h *deviceHeard) notOurs(agent string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ok || h.info.Coordinator || slices.Contains(h.info.Agents, agent) {
		return ""
	}
	agents := strings.Join(h.info.Agents, ", ")
	if agents == "" {
		agents = "it has none; the operator gives them with gateway device set --agents"
	}
	return fmt.Sprintf("%s is not one of this device's agents (%s): asks other devices address to it cannot be seen through this token (only those this device sent it); read the mailbox of one of them (--agent, or fix %s / %s)",
		mailbox.Quoted(agent), agents, ladder.EnvAgentName, ladder.EnvOriginLabel)
}
