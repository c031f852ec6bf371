package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// sseUpstream is a primary's /logstream/stream: a heartbeat, then every
// frame send passes to each stream open, until the gateway hangs up.
type sseUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	open map[chan string]bool
}

func startSSE(t *testing.T) *sseUpstream {
	t.Helper()
	u := &sseUpstream{open: map[chan string]bool{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch := make(chan string, 16)
		u.mu.Lock()
		u.open[ch] = true
		u.mu.Unlock()
		defer func() { u.mu.Lock(); delete(u.open, ch); u.mu.Unlock() }()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": ping\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case f := <-ch:
				io.WriteString(w, f)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// send passes an event to every stream open at the primary.
func (u *sseUpstream) send(body string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for ch := range u.open {
		ch <- fmt.Sprintf("id: e\nevent: logstream\ndata: {\"body\":%q}\n\n", body)
	}
}

func (u *sseUpstream) streams() int { u.mu.Lock(); defer u.mu.Unlock(); return len(u.open) }

// clientStream is a device's open stream through the gateway: its lines
// as they come, closed when the stream ends.
type clientStream struct {
	lines  chan string
	hangUp context.CancelFunc // the client's end of it
	err    error              // the read's end, once lines is closed: nil for a clean end (EOF)
}

// openStream opens path as token; a stream that is not answered 200 is
// returned nil with its status and body.
func (g *gw) openStream(t *testing.T, token, path string) (*clientStream, int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", g.http.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, string(b)
	}
	c := &clientStream{lines: make(chan string, 64), hangUp: cancel}
	go func() { // ends with the stream: the gateway's end, or cancel at cleanup
		defer close(c.lines)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				if err != io.EOF {
					c.err = err
				}
				return
			}
			c.lines <- l
		}
	}()
	t.Cleanup(func() {
		cancel()
		for range c.lines { // until the reader is done
		}
	})
	c.await(t, ": ping\n")
	return c, 200, ""
}

// await reads lines until one is want (within 5 s).
func (c *clientStream) await(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("the stream ended before %q", want)
			}
			if l == want || strings.Contains(l, want) && want != ": ping\n" {
				return
			}
		case <-timeout:
			t.Fatalf("no %q on the stream in 5 s", want)
		}
	}
}

// ended reports how long the stream took to end cleanly after since, and
// fails if an event in the lines it read after since got through.
func (c *clientStream) ended(t *testing.T, since time.Time, bound time.Duration) time.Duration {
	t.Helper()
	timeout := time.After(bound)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				if c.err != nil {
					t.Errorf("the stream was cut, not ended: %v", c.err)
				}
				return time.Since(since)
			}
			if strings.HasPrefix(l, "data:") {
				t.Errorf("an event reached the stream after the change: %q", l)
			}
		case <-timeout:
			t.Fatalf("the stream is still open %s after the change", bound)
		}
	}
}

// saveConfig changes the gateway's config file as the CLI does.
func (g *gw) saveConfig(t *testing.T, change func(c *Config)) time.Time {
	t.Helper()
	cfg, err := LoadConfig(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	change(cfg)
	time.Sleep(20 * time.Millisecond) // a distinct mtime
	if err := cfg.Save(g.cfgFile); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// attack69 F9: an open /logstream/stream honours its device's authorization
// now. Revoking its token, removing its device, or narrowing its scope
// (a coordinator no longer one) ends the stream within the watch's second:
// no event after that reaches it, and its primary's stream is let go. A
// reconnect is answered under the new config (401, 403). A change to
// another device leaves the stream open. Before, each stream ran on
// (60 s and more after a revocation, a private ask relayed to a
// former coordinator).
func TestOpenStreamEndsWithItsAuthorization(t *testing.T) {
	t.Parallel()
	const bound = 2 * time.Second // the docs' second, with room for a loaded CI machine
	for _, c := range []struct {
		name, device, path string
		change             func(c *Config)
		again              int // a reconnect's status
	}{
		{"token revoked", "laptop-7f3a", "/logstream/stream?to_agent=opencode@laptop", func(c *Config) { Revoke(c.Device("laptop-7f3a"), "") }, 401},
		{"device removed", "laptop-7f3a", "/logstream/stream?to_agent=opencode@laptop", func(c *Config) { c.Devices = c.Devices[1:] }, 401},
		{"coordinator no more", "admin-0001", "/logstream/stream", func(c *Config) { c.Device("admin-0001").Coordinator = false }, 403},
		{"agent taken away", "desk-9b21", "/logstream/stream?to_agent=pi@desk", func(c *Config) { c.Device("desk-9b21").Agents = []string{"claude@desk"} }, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up := startSSE(t)
			g := newGWAt(t, devices, &upstream{name: "sse", url: up.URL + "/mcp"})
			ctx, cancel := context.WithCancel(context.Background())
			watched := make(chan struct{})
			go func() { defer close(watched); g.srv.Watch(ctx) }()
			t.Cleanup(func() { cancel(); <-watched })
			token := g.tokens[c.device]
			s, code, body := g.openStream(t, token, c.path)
			if s == nil {
				t.Fatalf("the stream: %d %s", code, body)
			}
			otherDev, otherPath := "desk-9b21", "/logstream/stream?to_agent=pi@desk"
			if c.device == otherDev {
				otherDev, otherPath = "laptop-7f3a", "/logstream/stream?to_agent=opencode@laptop"
			}
			other, _, _ := g.openStream(t, g.tokens[otherDev], otherPath)
			up.send("before")
			s.await(t, "before")

			// Another device's change, not of its scope, leaves both be.
			g.saveConfig(t, func(c *Config) { c.Device(otherDev).ReadRate = 7 })
			for deadline := time.Now().Add(bound); g.srv.cfg.Load().Device(otherDev).ReadRate != 7; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the config was not reloaded")
				}
			}
			g.srv.recheckStreams() // as the watch's poll does after a reload
			up.send("unrelated change")
			s.await(t, "unrelated change")
			other.await(t, "unrelated change")

			at := g.saveConfig(t, c.change)
			t.Logf("ended %s after the config was saved", s.ended(t, at, bound))
			up.send("after")
			other.await(t, "after")
			for deadline := time.Now().Add(bound); up.streams() != 1; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the primary still serves %d streams, want the other device's alone", up.streams())
				}
			}
			if _, code, body := g.openStream(t, token, c.path); code != c.again {
				t.Errorf("a reconnect: %d %s, want %d", code, body, c.again)
			}
		})
	}
}

// A token rotated out stops at the end of its grace with no change to the
// config: its open stream ends at the watch's next poll, as a new request
// of it is refused, and the new token's stream goes on.
func TestOpenStreamEndsWithItsGrace(t *testing.T) {
	t.Parallel()
	up := startSSE(t)
	g := newGWAt(t, devices, &upstream{name: "sse", url: up.URL + "/mcp"})
	old, path := g.tokens["laptop-7f3a"], "/logstream/stream?to_agent=opencode@laptop"
	var next string
	g.advance(time.Minute) // the new token is the newer one
	g.saveConfig(t, func(c *Config) {
		var err error
		if next, err = Issue(g.srv.key, c.Device("laptop-7f3a"), g.clock()); err != nil {
			t.Fatal(err)
		}
	})
	if err := g.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	kept, code, body := g.openStream(t, next, path) // its first use starts the old one's grace
	if kept == nil {
		t.Fatalf("the new token's stream: %d %s", code, body)
	}
	s, code, body := g.openStream(t, old, path)
	if s == nil {
		t.Fatalf("the old token's stream within its grace: %d %s", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { defer close(watched); g.srv.Watch(ctx) }()
	t.Cleanup(func() { cancel(); <-watched })
	g.advance(8 * 24 * time.Hour)
	t.Logf("ended %s after the grace ran out", s.ended(t, time.Now(), 2*time.Second))
	up.send("after")
	kept.await(t, "after") // the new token's stream goes on
	if _, code, _ := g.openStream(t, old, path); code != 401 {
		t.Errorf("the old token's stream after its grace: %d, want 401", code)
	}
}

// attack69 F11 and review24 O1: one device holds at most its share of
// streams (max_streams; by default one per agent, and at least 2) of the
// 8 the primary serves to every device together. A stream past the share
// is admitted and ends that device's oldest (logged; the new stream's
// audit line has rule stream:share), never another device's, so a laptop
// back from sleep, its old connections still looking open, gets its
// stream, once its old ones are a minute old (streamReplaceAge): a
// fresh one is not ended, the new stream refused 429. A lowered share
// applies at the device's next stream. Before,
// the third stream was refused 429 until the dead connections timed out
// (minutes), and a device with three agents could not stream to its third.
func TestStreamShare(t *testing.T) {
	t.Parallel()
	up := startSSE(t)
	fleet := append(slices.Clone(devices), Device{ID: "box-3c01", Label: "box", Read: []string{"shared"}, Agents: []string{"a@box", "b@box", "c@box"}})
	g := newGWAt(t, fleet, &upstream{name: "sse", url: up.URL + "/mcp"})
	var logged testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	open := func(device string, agents ...string) []*clientStream {
		t.Helper()
		var ss []*clientStream
		for _, a := range agents {
			s, code, body := g.openStream(t, g.tokens[device], "/logstream/stream?to_agent="+a)
			if s == nil {
				t.Fatalf("%s's stream to %s: %d %s", device, a, code, body)
			}
			ss = append(ss, s)
		}
		return ss
	}
	live := func(want int, ss ...*clientStream) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); up.streams() != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the primary serves %d streams, want %d", up.streams(), want)
			}
		}
		up.send(t.Name())
		for _, s := range ss {
			s.await(t, t.Name())
		}
	}
	desk := open("desk-9b21", "pi@desk")[0]
	laptop := open("laptop-7f3a", "opencode@laptop", "opencode@laptop")
	// A third while both are fresh is refused: ending a fresh one would
	// open another on the primary before it frees the ended one's slot
	// (at its next ping), so a device cycling streams filled all 8
	// (attack72 F1).
	if s, code, _ := g.openStream(t, g.tokens["laptop-7f3a"], "/logstream/stream?to_agent=opencode@laptop"); s != nil || code != http.StatusTooManyRequests {
		t.Fatalf("laptop's third stream while its two are fresh: %d (want 429)", code)
	}
	g.advance(streamReplaceAge)
	laptop = append(laptop, open("laptop-7f3a", "opencode@laptop")...)
	laptop[0].ended(t, time.Now(), 5*time.Second)
	live(3, desk, laptop[1], laptop[2])
	if !slices.ContainsFunc(g.auditLog(), func(e Entry) bool {
		return e.Rule == ruleStreamShare && e.Decision == VerdictAllow && e.Device == "laptop-7f3a" && e.Status == 200
	}) {
		t.Error("the stream that ended an older one has no audit line with rule stream:share")
	}

	box := open("box-3c01", "a@box", "b@box", "c@box") // three agents: a share of 3
	live(6, desk, laptop[1], laptop[2], box[0], box[1], box[2])
	g.advance(streamReplaceAge)
	box = append(box, open("box-3c01", "a@box")...)
	box[0].ended(t, time.Now(), 5*time.Second)
	live(6, desk, laptop[1], laptop[2], box[1], box[2], box[3])

	g.saveConfig(t, func(c *Config) { c.Device("laptop-7f3a").MaxStreams = 1 })
	if err := g.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	g.advance(streamReplaceAge)
	laptop = append(laptop, open("laptop-7f3a", "opencode@laptop")...)
	laptop[1].ended(t, time.Now(), 5*time.Second)
	laptop[2].ended(t, time.Now(), 5*time.Second)
	live(5, desk, laptop[3], box[1], box[2], box[3])
	if n := strings.Count(logged.String(), "oldest open stream ended"); n != 4 || !strings.Contains(logged.String(), "device=laptop-7f3a share=1") {
		t.Errorf("%d ends logged, want 4, the last naming the laptop and its share of 1:\n%s", n, logged.String())
	}
}

// attack111 F2: a stream its device ended counts against the device's
// share until the primary has surely freed its slot (upstreamSlotLinger),
// so a device that closes its own streams, never holding more than one
// open, is refused 429 with a Retry-After once its ended streams fill
// its share, and another device's stream is not refused for it. Before,
// the share counted only streams open at the gateway: one device
// reconnecting quickly held all 8 of the primary's slots and every other
// device met its 503.
func TestStreamShareCountsEndedStreams(t *testing.T) {
	t.Parallel()
	up := startSSE(t)
	g := newGWAt(t, devices, &upstream{name: "sse", url: up.URL + "/mcp"})
	desk := g.tokens["desk-9b21"]
	const path = "/logstream/stream?to_agent=pi@desk"
	for range streamShare(g.srv.cfg.Load().Device("desk-9b21")) {
		g.openAndHangUp(t, desk, path, 0)
	}
	if code, retry, body := g.refusedStream(t, desk, path); code != http.StatusTooManyRequests || retry != "20" || !strings.Contains(body, "streams it ended in the last 20s") {
		t.Fatalf("a stream while the device's ended ones hold its share: %d, Retry-After %q, %s", code, retry, body)
	}
	if s, code, body := g.openStream(t, g.tokens["laptop-7f3a"], "/logstream/stream?to_agent=opencode@laptop"); s == nil {
		t.Fatalf("another device's stream: %d %s", code, body)
	}
	// 19.3 s left: a client that waits the Retry-After gets through, so it
	// is rounded up (attack115 F4: 19, then a 429 again).
	g.advance(700 * time.Millisecond)
	if code, retry, _ := g.refusedStream(t, desk, path); code != http.StatusTooManyRequests || retry != "20" {
		t.Errorf("19.3 s before a slot frees: %d, Retry-After %q, want 429 and 20", code, retry)
	}
	g.advance(upstreamSlotLinger - 700*time.Millisecond)
	if s, code, body := g.openStream(t, desk, path); s == nil {
		t.Fatalf("desk's stream once the primary freed its slots: %d %s", code, body)
	}
}

// openAndHangUp opens a stream as token and hangs it up, then waits
// until the gateway holds no more than left streams open.
func (g *gw) openAndHangUp(t *testing.T, token, path string, left int) {
	t.Helper()
	s, code, body := g.openStream(t, token, path)
	if s == nil {
		t.Fatalf("the stream: %d %s", code, body)
	}
	s.hangUp()
	for deadline := time.Now().Add(5 * time.Second); len(g.srv.open.all()) > left; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the gateway still holds the stream its device hung up")
		}
	}
}

// refusedStream asks for a stream that should be refused: its status,
// Retry-After and body (a 200's body, a stream, is not read).
func (g *gw) refusedStream(t *testing.T, token, path string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.http.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body []byte
	if resp.StatusCode != 200 {
		body, _ = io.ReadAll(resp.Body)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
}

// attack120 F4: a reconnect the primary refuses (503) while a stream
// the gateway ended still holds its slot there ends none of the device's
// open streams: its old one still delivers events, and the 503's
// Retry-After is when that slot frees. Once the primary accepts the new
// one, the old one ends. Before, the old stream was ended as the new one
// was asked for, so the device had no stream until its retry.
func TestStreamRefusedByThePrimaryKeepsTheOldOne(t *testing.T) {
	t.Parallel()
	g, sse, full := gatewayBeforeAFullPrimary(t)
	laptop := g.tokens["laptop-7f3a"]
	const path = "/logstream/stream?to_agent=opencode@laptop"
	var old []*clientStream
	for range 2 {
		s, code, body := g.openStream(t, laptop, path)
		if s == nil {
			t.Fatalf("laptop's stream: %d %s", code, body)
		}
		old = append(old, s)
	}
	g.advance(streamReplaceAge)
	if s, code, body := g.openStream(t, laptop, path); s == nil { // accepted: old[0] ends, its slot lingering
		t.Fatalf("laptop's first reconnect: %d %s", code, body)
	}
	old[0].ended(t, time.Now(), 5*time.Second)
	g.advance(4 * time.Second)
	full.Store(true)
	if code, retry, body := g.refusedStream(t, laptop, path); code != http.StatusServiceUnavailable || retry != "16" {
		t.Fatalf("laptop's second reconnect, the primary full: %d, Retry-After %q (want 503, 16: when the first ended stream's slot frees), %s", code, retry, body)
	}
	sse.send("after the refused reconnect")
	old[1].await(t, "after the refused reconnect")
	full.Store(false)
	g.advance(16 * time.Second)
	if s, code, body := g.openStream(t, laptop, path); s == nil {
		t.Fatalf("laptop's reconnect retried: %d %s", code, body)
	}
	old[1].ended(t, time.Now(), 5*time.Second)
}

// review34 R2: a 429's Retry-After is the time until the device's next
// stream gets through, here when its ended streams' slots free (20 s).
// Before, it was counted from the device's oldest open stream: past
// already for one a few minutes old, so "Retry-After: 1" for a 20 s wait.
func TestStreamShareRetryAfterWithAnOldStreamOpen(t *testing.T) {
	t.Parallel()
	up := startSSE(t)
	g := newGWAt(t, devices, &upstream{name: "sse", url: up.URL + "/mcp"})
	desk := g.tokens["desk-9b21"]
	const path = "/logstream/stream?to_agent=pi@desk"
	share := func(n int) {
		t.Helper()
		g.saveConfig(t, func(c *Config) { c.Device("desk-9b21").MaxStreams = n })
		if err := g.srv.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	share(3)
	old, code, body := g.openStream(t, desk, path)
	if old == nil {
		t.Fatalf("desk's stream: %d %s", code, body)
	}
	g.advance(5 * time.Minute)
	for range 2 {
		g.openAndHangUp(t, desk, path, 1)
	}
	share(2)
	if code, retry, body := g.refusedStream(t, desk, path); code != http.StatusTooManyRequests || retry != "20" {
		t.Fatalf("a stream with one old stream open and two just ended, share 2: %d, Retry-After %q (want 429, 20), %s", code, retry, body)
	}
	g.advance(upstreamSlotLinger)
	if s, code, body := g.openStream(t, desk, path); s == nil {
		t.Fatalf("desk's stream after the Retry-After: %d %s", code, body)
	}
}

// review34 R3: a laptop back from sleep, its share of 2 held by
// connections a minute old, gets both its streams back at once: a stream
// the gateway ended for its device's new one hands its place in the share
// to it. Before, the first reconnect's ended stream counted for 20 s and
// the second agent's reconnect was refused 429. The share still holds:
// a third stream, its two fresh, is refused (attack111 F2), told its
// open streams hold the share and to retry once they are a minute old.
func TestStreamShareWakeUpGetsEveryStreamBack(t *testing.T) {
	t.Parallel()
	up := startSSE(t)
	g := newGWAt(t, devices, &upstream{name: "sse", url: up.URL + "/mcp"})
	laptop := g.tokens["laptop-7f3a"]
	const path = "/logstream/stream?to_agent=opencode@laptop"
	var asleep []*clientStream
	for range 2 {
		s, code, body := g.openStream(t, laptop, path)
		if s == nil {
			t.Fatalf("laptop's stream: %d %s", code, body)
		}
		asleep = append(asleep, s)
	}
	g.advance(streamReplaceAge)
	for i, old := range asleep {
		if s, code, body := g.openStream(t, laptop, path); s == nil {
			t.Fatalf("laptop's reconnect %d after sleep: %d %s", i+1, code, body)
		}
		old.ended(t, time.Now(), 5*time.Second)
	}
	if code, retry, body := g.refusedStream(t, laptop, path); code != http.StatusTooManyRequests || retry != "60" || !strings.Contains(body, "all of them open") {
		t.Fatalf("a third stream, its two fresh: %d, Retry-After %q (want 429, 60, all open), %s", code, retry, body)
	}
}

// attack111 F5: a stream the primary refuses keeps the primary's reason
// (it was "the upstream answered HTTP 400" alone), the upstream token
// redacted and, for a device not admin, the primary's paths cut; its 503
// says the primary's streams are all held.
func TestStreamRefusalKeepsTheReason(t *testing.T) {
	t.Parallel()
	code := http.StatusBadRequest
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error": "since_event_id 'evt_bad' not found (%s in /srv/palace/logstream.sqlite3)"}`, upstreamToken)
	}))
	t.Cleanup(up.Close)
	g := newGWAt(t, devices, &upstream{name: "sse", url: up.URL + "/mcp"})
	_, status, body := g.openStream(t, g.tokens["desk-9b21"], "/logstream/stream?to_agent=pi@desk&since_event_id=evt_bad")
	if status != 400 || !strings.Contains(body, "since_event_id 'evt_bad' not found") || strings.Contains(body, upstreamToken) || strings.Contains(body, "/srv/palace") {
		t.Errorf("an unknown cursor: %d %s", status, body)
	}
	code = http.StatusServiceUnavailable
	if _, status, body := g.openStream(t, g.tokens["desk-9b21"], "/logstream/stream?to_agent=pi@desk"); status != 503 || !strings.Contains(body, "MEMPALACE_SSE_MAX_CLIENTS") {
		t.Errorf("the primary's streams all held: %d %s", status, body)
	}
}

// attack119 F1, F2: a laptop back from sleep opens its streams anew, the
// gateway ending its old ones, whose slots the primary still holds: it
// answers 503 with its Retry-After of 5, though the slots free only
// within upstreamSlotLinger. The gateway knows when: its 503, to any
// device, says wait until the first is freed (rounded up, or the
// primary's 5 once that is longer), and names the streams it ended,
// their device, and the fix counting a reconnecting device's share
// twice. With none lingering, the primary's Retry-After and the plain
// sum are said. Before, the wait was the primary's 5 throughout, and the
// fix the plain sum of the shares, which fit already.
func TestStreamPrimaryFullAfterAReconnect(t *testing.T) {
	t.Parallel()
	g, _, full := gatewayBeforeAFullPrimary(t)
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	const path = "/logstream/stream?to_agent=opencode@laptop"
	var asleep []*clientStream
	for range 2 {
		s, code, body := g.openStream(t, laptop, path)
		if s == nil {
			t.Fatalf("laptop's stream: %d %s", code, body)
		}
		asleep = append(asleep, s)
	}
	g.advance(streamReplaceAge)
	full.Store(true) // the primary holds the old streams' slots still
	code, retry, body := g.refusedStream(t, laptop, path)
	asleep[0].ended(t, time.Now(), 5*time.Second)
	if code != http.StatusServiceUnavailable || retry != "20" || !strings.Contains(body, "ended less than 20s ago, whose slots it frees only then (laptop-7f3a: 1)") || !strings.Contains(body, "reconnecting device's share counted twice") || !strings.Contains(body, "clears within the wait") {
		t.Fatalf("laptop's reconnect, the primary full: %d, Retry-After %q (want 503, 20, naming the laptop's ended stream and the fix), %s", code, retry, body)
	}
	g.advance(700 * time.Millisecond)
	if code, retry, body := g.refusedStream(t, desk, "/logstream/stream?to_agent=pi@desk"); code != http.StatusServiceUnavailable || retry != "20" {
		t.Errorf("desk's stream 19.3 s before the slot frees: %d, Retry-After %q, want 503 and 20: %s", code, retry, body)
	}
	g.advance(18 * time.Second)
	if _, retry, _ := g.refusedStream(t, laptop, path); retry != "5" {
		t.Errorf("1.3 s before the slot frees: Retry-After %q, want the primary's 5", retry)
	}
	g.advance(2 * time.Second)
	if _, retry, body := g.refusedStream(t, laptop, path); retry != "5" || !strings.Contains(body, "at least the sum of the devices' shares") || strings.Contains(body, "ended less than") {
		t.Errorf("the slot freed, the primary full: Retry-After %q (want the primary's 5, the plain sum), %s", retry, body)
	}
}

// gatewayBeforeAFullPrimary is a gateway before an SSE primary that,
// once full is set, answers every request 503 with Retry-After 5, as
// MemPalace's serve does with its stream slots taken.
func gatewayBeforeAFullPrimary(t *testing.T) (*gw, *sseUpstream, *atomic.Bool) {
	t.Helper()
	sse := startSSE(t)
	full := &atomic.Bool{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !full.Load() {
			sse.Config.Handler.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error": "too many SSE clients"}`)
	}))
	t.Cleanup(up.Close)
	return newGWAt(t, devices, &upstream{name: "sse", url: up.URL + "/mcp"}), sse, full
}
