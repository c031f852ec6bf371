package edge

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/redact"
)

// The breaker's way back (probe), and the check `edge status` and
// `edge flush` make (Check): both ask with the token, not only /healthz.

// probe polls /healthz with jittered backoff (Probe to ProbeMax, 0.25 s
// to 30 s by default) and, when it
// answers, opens a session; success closes the breaker.
func (p *Primary) probe() {
	wait := p.o.Probe
	for {
		t := time.NewTimer(wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1)))
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := p.tryUp()
		if err == nil {
			p.mu.Lock()
			p.down, p.unauth, p.lastErr, p.probing = false, false, nil, false
			p.mu.Unlock()
			p.log.Info("primary reachable again", "url", logURL(p.endpoint))
			if p.o.OnUp != nil {
				p.o.OnUp()
			}
			return
		}
		p.mu.Lock()
		if p.refused() != 0 && !p.unauth {
			// Back, but refusing the token (rotated while it was down):
			// the session start and status say the token, not the network.
			p.unauth, p.lastErr = true, outbox.ErrUnauthorized
			if !p.o.Quiet {
				p.log.Error("the primary answers again but refuses the token; nothing is sent to it until MEMPALACE_REMOTE_TOKEN is fixed (devbox-config doctor names the fix)", "url", logURL(p.endpoint))
			}
		}
		p.mu.Unlock()
		wait = min(wait*2, p.o.ProbeMax)
	}
}

// tryUp asks /healthz and, if it answers, makes a handshake: nil when the
// primary takes calls again.
func (p *Primary) tryUp() error {
	ctx, cancel := context.WithTimeout(p.ctx, min(p.o.Timeout, 5*time.Second))
	defer cancel()
	if h := healthzURL(p.endpoint); h != "" {
		req, err := http.NewRequestWithContext(context.WithValue(ctx, healthKey{}, true), http.MethodGet, h, nil)
		if err != nil {
			return fmt.Errorf("the primary's /healthz: %w", err)
		}
		resp, err := p.httpc.Do(req)
		if err != nil {
			return fmt.Errorf("the primary's /healthz: %w", err)
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1024)) // the status is the answer; the body is drained for reuse
		resp.Body.Close()                                    // as above
		if resp.StatusCode >= 500 {
			return fmt.Errorf("the primary's /healthz answered HTTP %d", resp.StatusCode)
		}
	}
	return p.handshake(ctx) // /healthz answered (or is not routed here): a real handshake decides
}

// handshake is an authenticated round trip: a session opened (or reused)
// and pinged (a server without ping still answered). A session whose ping
// failed is dropped.
func (p *Primary) handshake(ctx context.Context) error {
	s, err := p.sessionFor(ctx)
	if err != nil {
		return err
	}
	if err := s.Ping(ctx, nil); err != nil && peerError(err) == nil {
		p.drop(s)
		return err
	}
	return nil
}

// refused is the last status seen when it refused the token (401 or 403), else 0.
func (p *Primary) refused() int32 {
	if st := p.lastStatus.Load(); st == http.StatusUnauthorized || st == http.StatusForbidden {
		return st
	}
	return 0
}

// tokenRefusal says "refused the token (HTTP 401): check
// MEMPALACE_REMOTE_TOKEN" when the last status was 401 or 403, else "".
func (p *Primary) tokenRefusal() string {
	if st := p.refused(); st != 0 {
		return fmt.Sprintf("refused the token (HTTP %d): check MEMPALACE_REMOTE_TOKEN", st)
	}
	return ""
}

func healthzURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	u.Path, u.RawQuery, u.Fragment = "/healthz", "", ""
	return u.String()
}

// Check asks the primary with an authenticated call (an MCP handshake and
// a ping, not only /healthz, which asks for no token) and says what it
// found: "reachable, token accepted", "refused the token (HTTP 401)", or
// "unreachable: <why>". For `edge status` and `edge flush`.
func (p *Primary) Check(ctx context.Context) string {
	ctx = withWhySlot(ctx)
	err := p.handshake(ctx)
	if why := p.tokenRefusal(); why != "" {
		return why
	}
	if why := p.whySlot(ctx).Load(); err != nil && why != nil && why.gateway {
		return behindGateway{err, why.text}.Error() // the gateway's words, which peekWhy made safe
	}
	if err != nil {
		// redacted and printable: Go quotes a malformed header whole, a
		// Location holding the token included (attack62 N2)
		return "unreachable: " + mailbox.Printable(redact.Secret(err.Error(), p.token()))
	}
	return "reachable, token accepted"
}
