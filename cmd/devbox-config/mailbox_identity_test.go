package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// The gateway tells the device its agents (Devbox-Config-Device): a
// mailbox read for an identity that is not one of them (a label typo,
// claude@alice-laptop for claude@alice) can never see an ask, and said
// "Nothing is owed" with no warning. It warns on stderr (exit 0 still);
// its own agent, a coordinator (which sees every event) and a primary
// without the header get no warning.
func TestMailboxWarnsOfAnIdentityNotTheDevices(t *testing.T) {
	const token = "tok-SECRET-mailbox"
	_, srv := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: token})
	header := ""
	target, _ := url.Parse(srv.URL())
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
		r.Out.Host = target.Host
	}}
	proxy.ModifyResponse = func(r *http.Response) error {
		if header != "" {
			r.Header.Set("Devbox-Config-Device", header)
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	for _, k := range []string{"MEMPALACE_AGENT_NAME", "MEMPALACE_EDGE", "MEMPALACE_EDGE_HARNESS", "MEMPALACE_ORIGIN_LABEL"} {
		t.Setenv(k, "")
	}
	t.Setenv("MEMPALACE_REMOTE_URL", front.URL+strings.TrimPrefix(srv.URL(), target.Scheme+"://"+target.Host))
	t.Setenv("MEMPALACE_REMOTE_TOKEN", token)
	const alice = `{"version":1,"id":"alice-01","label":"alice","agents":["claude@alice"],"coordinator":false}`
	for _, c := range []struct{ header, agent, want string }{
		{alice, "claude@alice-laptop", `"claude@alice-laptop" is not one of this device's agents (claude@alice): asks other devices address to it cannot be seen through this token (only those this device sent it)`},
		{alice, "claude@alice", ``},
		{`{"version":1,"id":"ops-09","label":"ops","agents":["pi@ops"],"coordinator":true}`, "claude@alice", ``},
		{``, "claude@alice-laptop", ``},
	} {
		header = c.header
		var out, errb bytes.Buffer
		if got := run([]string{"mailbox", "--agent", c.agent}, &out, &errb); got != 0 {
			t.Fatalf("%s: exit %d\n%s%s", c.agent, got, out.String(), errb.String())
		}
		if c.want == "" && strings.Contains(errb.String(), "not one of") || !strings.Contains(errb.String(), c.want) {
			t.Errorf("header %s, --agent %s: stderr %q, want %q", c.header, c.agent, errb.String(), c.want)
		}
	}
	// Attack55 F4: with MEMPALACE_ORIGIN_LABEL unset the mailbox read the
	// bare "claude" and said "Nothing is owed"; it says which name it used,
	// that the label is unset, and the line to add (the gateway's label,
	// else a placeholder). --agent is the caller's choice: nothing said.
	t.Setenv("MEMPALACE_AGENT_NAME", "claude")
	for _, c := range []struct{ header, args, want string }{
		{alice, "", "warning: the agent identity is the bare \"claude\": MEMPALACE_ORIGIN_LABEL is unset in .env, so it is not \"claude@alice\", the address other devices write to; add the line `MEMPALACE_ORIGIN_LABEL=alice` to .env"},
		{``, "", "add the line `MEMPALACE_ORIGIN_LABEL=<label>` to .env (the device's label, as `devbox-config gateway device list` shows it)"},
		{alice, "--agent=claude", ""},
	} {
		header = c.header
		var out, errb bytes.Buffer
		if got := run(append([]string{"mailbox"}, strings.Fields(c.args)...), &out, &errb); got != 0 {
			t.Fatalf("exit %d\n%s%s", got, out.String(), errb.String())
		}
		if c.want == "" && strings.Contains(errb.String(), "LABEL is unset") || !strings.Contains(errb.String(), c.want) {
			t.Errorf("header %s, %s: stderr %q, want %q", c.header, c.args, errb.String(), c.want)
		}
	}
}
