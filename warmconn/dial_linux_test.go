package warmconn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// A connect that hangs (the server's SYNs dropped: a firewall's
// blackhole, a listener whose backlog is full) fails within DialTimeout,
// however long the request's own deadline: a long write's bound is for
// its exchange, not for reaching the server (review28b F3). Before, the
// dial ran on the request's deadline, up to the kernel's SYN retries
// (about two minutes).
func TestAHungConnectEndsAtTheDialTimeout(t *testing.T) {
	t.Parallel()
	addr := testbed.FullBacklog(t)
	tr, err := New("http://"+addr+"/mcp", http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.DialTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp", nil)
	began := time.Now()
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a request to a server whose connects hang was answered")
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("a connect that hangs took %v, want about the dial timeout", took)
	}
}
