package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
)

func newMailboxCmd(stdout, stderr io.Writer, env ladder.Lookup) *cobra.Command {
	var agent, stream string
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "mailbox",
		Short: "Show what this agent still owes on the coordination log (RFC 003 §3.3), for hooks and scripts",
		Long: `mailbox reads the primary's coordination log (MEMPALACE_REMOTE_URL, bearer
MEMPALACE_REMOTE_TOKEN from the environment) and prints the events addressed to
this agent that it has not answered with a terminal reply, oldest first, each
with why it is owed. It is derived, not the status=open query: status is
written once and never changes, so "open" keeps matching answered asks.

The agent is --agent, else <name>@<label> from MEMPALACE_AGENT_NAME (else
MEMPALACE_EDGE_HARNESS) and MEMPALACE_ORIGIN_LABEL. --timeout defaults to
MEMPALACE_EDGE_TIMEOUT (10s).

--json prints {"agent": "...", "owed": [event objects as the primary returned
them, each plus "why"], "count": n}.

Exit status: 0 whether or not something is owed, 1 when the primary cannot be
read, 2 on usage errors (no agent identity, no MEMPALACE_REMOTE_URL).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The local server is not needed here: nothing looks it up.
			s, warns, err := ladder.ResolveEdge(env, func(string) (string, error) { return "", exec.ErrNotFound })
			if err != nil {
				return usageError("%v", err)
			}
			for _, w := range warns {
				if w.Var == ladder.EnvRemoteURL || w.Var == ladder.EnvEdgeHarness || w.Var == ladder.EnvAgentName || w.Var == ladder.EnvOriginLabel {
					fmt.Fprintln(stderr, "devbox-config: warning:", w)
				}
			}
			if !cmd.Flags().Changed("timeout") {
				timeout = s.Timeout
			}
			if agent = strings.TrimSpace(agent); agent == "" {
				agent = s.Identity()
			}
			switch agent {
			case "":
				return usageError("no agent identity: pass --agent NAME or set %s (or %s) and %s", ladder.EnvAgentName, ladder.EnvEdgeHarness, ladder.EnvOriginLabel)
			case "*":
				return usageError(`--agent "*" is the broadcast address, which owes nothing (RFC 003 §7.4)`)
			}
			if s.URL == "" {
				return usageError("%s is not set or not usable: the mailbox reads the primary", ladder.EnvRemoteURL)
			}
			if timeout <= 0 {
				return usageError("--timeout must be positive")
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			r, err := readMailbox(ctx, s.URL, ladder.TokenSource(env)(), agent, stream, timeout)
			if err != nil {
				return exitError{1, fmt.Errorf("cannot read the primary at %s: %w", redactEndpoint(s.URL), err)}
			}
			for _, w := range r.Warnings {
				fmt.Fprintln(stderr, "devbox-config: warning:", w)
			}
			if asJSON {
				b, err := json.MarshalIndent(struct {
					Agent string         `json:"agent"`
					Owed  []mailbox.Item `json:"owed"`
					Count int            `json:"count"`
				}{r.Agent, r.Owed, r.Count}, "", "  ")
				if err != nil {
					return exitError{1, fmt.Errorf("encode the mailbox: %w", err)}
				}
				fmt.Fprintln(stdout, string(b))
				return nil
			}
			r.Warnings = nil
			fmt.Fprint(stdout, r.Text())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "whose mailbox (default: <harness>@<label> from the environment)")
	f.StringVar(&stream, "stream", "", "only events of this stream")
	f.BoolVar(&asJSON, "json", false, `print {"agent", "owed", "count"}`)
	f.DurationVar(&timeout, "timeout", ladder.DefaultEdgeTimeout, "give up on the primary after this long (default: MEMPALACE_EDGE_TIMEOUT, else 10s)")
	return cmd
}

// readMailbox connects to the primary over Streamable HTTP (upstream's
// POST-only JSON server and session-issuing servers alike) and derives
// the owed set.
func readMailbox(ctx context.Context, endpoint, token, agent, stream string, timeout time.Duration) (mailbox.Result, error) {
	httpc := &http.Client{Transport: bearerTransport{token: token, next: http.DefaultTransport}, Timeout: timeout}
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
	src := mailbox.ToolSource{Call: s.CallTool, AscOrder: mailbox.SupportsOrder(tools)}
	return mailbox.Owed(ctx, src, agent, stream, 0)
}

// bearerTransport adds the token to every request; the token is never
// part of an error or a log line.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// redactEndpoint drops credentials, query and fragment for messages.
func redactEndpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the primary"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
