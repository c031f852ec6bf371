package ladder_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/testbed"
)

// A primary whose answer holds a header line net/http cannot read (a
// Location with a control character and a token in its query): the
// client's error quotes that line, and Unreadable says it without it.
func TestUnreadableHidesTheLineNetHTTPQuotes(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequest(http.MethodPost, testbed.UnreadableHeader(t), strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, rtErr := (&http.Transport{}).RoundTrip(req)
	if rtErr == nil || !strings.Contains(rtErr.Error(), "s3cret") {
		t.Fatalf("the round trip's own error does not quote the line (the case this guards has changed): %v", rtErr)
	}
	got := ladder.Unreadable(rtErr).Error()
	if strings.Contains(got, "s3cret") || strings.ContainsAny(got, "\x01\x1b\x07") || !strings.Contains(got, "malformed header line") {
		t.Errorf("Unreadable = %q: want the line not shown, and said to be malformed", got)
	}
	if other := ladder.Unreadable(http.ErrServerClosed); other != http.ErrServerClosed {
		t.Errorf("another error is changed: %v", other)
	}
}
