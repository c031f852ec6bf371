package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A device that withholds untrusted senders: its gateway leaves their
// events out of event_list and counts them in "untrusted_withheld". The
// mailbox says how many, in the text and in --json, and how to see them,
// rather than "Nothing is owed" and count 0 (attack111 F4).
func TestMailboxCommandSaysHowManyWereWithheld(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "withholding-gateway", Version: "0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "mempalace_event_list", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"to_agent": map[string]any{"type": "string"}}}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text := `{"events": [], "count": 0, "untrusted_withheld": 913}`
			if !strings.Contains(string(req.Params.Arguments), "to_agent") {
				text = `{"events": [], "count": 0}` // the agent's own replies
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true, Stateless: true}))
	t.Cleanup(h.Close)
	for k, v := range map[string]string{"MEMPALACE_REMOTE_URL": h.URL, "MEMPALACE_REMOTE_TOKEN": "", "MEMPALACE_EDGE_HARNESS": "", "MEMPALACE_AGENT_NAME": "", "MEMPALACE_ORIGIN_LABEL": ""} {
		t.Setenv(k, v)
	}
	for args, want := range map[string]string{
		"mailbox --agent pi@carol":        `913 events addressed to "pi@carol" were withheld as from senders outside this device's trusted set`,
		"mailbox --agent pi@carol --json": `"untrusted_withheld": 913`,
	} {
		var out, errb bytes.Buffer
		if code := run(strings.Fields(args), &out, &errb); code != 0 || !strings.Contains(out.String(), want) || strings.Contains(out.String(), "Nothing is owed") {
			t.Errorf("%s: exit %d, want %s\n%s%s", args, code, want, out.String(), errb.String())
		}
	}
}
