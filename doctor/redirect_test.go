package doctor

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// A primary that answers a redirect whose Location does not parse (a tab
// in it) is said to redirect, with MEMPALACE_REMOTE_URL's fix, and the
// Location's query is shown nowhere (before: net/http failed it parsing
// the Location, ahead of doctor's CheckRedirect, and primary-unreachable
// quoted the header, query and all).
func TestAPrimarysUnparsableRedirectShowsNoQuery(t *testing.T) {
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Location"] = []string{"http://x/\t?token=s3cret"}
		w.WriteHeader(http.StatusFound)
	}))
	defer h.Close()
	b := newBox(t)
	b.edgeMode(h.URL+"/mcp", "tok-0123456789abcdef0123")
	fs := b.run()
	said := false
	for _, f := range fs {
		if strings.Contains(f.Message+f.Fix, "s3cret") {
			t.Errorf("%s shows the Location's query: %s | %s", f.ID, f.Message, f.Fix)
		}
		said = said || f.ID == IDPrimaryUnreachable && strings.Contains(f.Message, "redirect") && strings.Contains(f.Message, "MEMPALACE_REMOTE_URL")
	}
	if !said {
		t.Errorf("no finding says the primary redirects: %v", ids(fs))
	}
}

// A primary whose answer holds a header line net/http cannot read (a
// control character, terminal escapes and a token in a Location): doctor
// says the primary's answer is unreadable, without the line.
func TestAPrimarysUnreadableHeaderIsNotQuoted(t *testing.T) {
	b := newBox(t)
	b.edgeMode(testbed.UnreadableHeader(t), "tok-0123456789abcdef0123")
	said := false
	for _, f := range b.run() {
		if strings.Contains(f.Message+f.Fix, "s3cret") || strings.ContainsAny(f.Message+f.Fix, "\x01\x1b\x07") {
			t.Errorf("%s quotes the primary's unreadable line: %q | %q", f.ID, f.Message, f.Fix)
		}
		said = said || f.ID == IDPrimaryUnreachable && strings.Contains(f.Message, "malformed header line")
	}
	if !said {
		t.Error("no finding says the primary's answer did not read as HTTP")
	}
}
