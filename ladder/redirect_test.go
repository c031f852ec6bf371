package ladder

import (
	"net/http"
	"strings"
	"testing"
)

// A redirect to the configured origin advises pointing
// MEMPALACE_REMOTE_URL at its target; one to another host, scheme or port
// says so and advises checking first, for the token would go there next
// (the review of Redirected: it advised switching to any target).
func TestRedirectedAdvisesSwitchingOnlyWithinTheOrigin(t *testing.T) {
	const same = "set MEMPALACE_REMOTE_URL to the final URL"
	const other = "another host, scheme or port: check it is your primary before pointing MEMPALACE_REMOTE_URL at it"
	for _, c := range []struct{ from, loc, want string }{
		{"http://primary:8080/mcp", "/mcp/", same},
		{"http://primary:8080/mcp", "http://PRIMARY:8080/v2/mcp", same},
		{"https://primary/mcp", "https://primary:443/mcp/", same},
		{"http://primary:8080/mcp", "http://attacker.example:8080/mcp", other},
		{"http://primary:8080/mcp", "http://primary:9090/mcp", other},
		{"http://primary/mcp", "https://primary/mcp", other},
		{"http://primary:8080/mcp", "//attacker.example/mcp", other},
	} {
		req, err := http.NewRequest(http.MethodPost, c.from, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp := &http.Response{StatusCode: http.StatusTemporaryRedirect, Header: http.Header{"Location": {c.loc}}}
		if got := Redirected(req, resp); got == nil || !strings.Contains(got.Error(), c.want) {
			t.Errorf("%s redirected to %s: %v, want it to say %q", c.from, c.loc, got, c.want)
		}
	}
}
