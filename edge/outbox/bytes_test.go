package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// front stands before the rig's primary: it records the size of every
// tools/call it passes on, and cuts the connection (after reading the
// request, without passing it on) for the calls cut says to.
type front struct {
	to  *url.URL
	cut func(tool string, body []byte) bool
	// answer, if set and it returns a result, answers a tools/call in the
	// primary's place (a server the double does not imitate).
	answer func(tool string) json.RawMessage
	mu     sync.Mutex
	sizes  map[string][]int
	args   map[string][]string // the arguments' bytes as they arrived
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	tool := gjson.GetBytes(body, "params.name").String()
	if gjson.GetBytes(body, "method").String() == "tools/call" {
		f.mu.Lock()
		f.sizes[tool] = append(f.sizes[tool], len(body))
		f.args[tool] = append(f.args[tool], gjson.GetBytes(body, "params.arguments").Raw)
		f.mu.Unlock()
		if f.cut != nil && f.cut(tool, body) {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		if f.answer != nil {
			if res := f.answer(tool); res != nil {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, gjson.GetBytes(body, "id").Raw, res)
				return
			}
		}
	}
	out, _ := http.NewRequest(r.Method, f.to.Scheme+"://"+f.to.Host+r.URL.Path, bytes.NewReader(body))
	out.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (f *front) calls(tool string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sizes[tool]...)
}

// behind puts a front between the rig's flusher and its primary.
func (r *rig) behind(cut func(string, []byte) bool) *front {
	return r.behindTimed(cut, 5*time.Second)
}

// behindTimed is behind with the call timeout of the flusher's Primary.
func (r *rig) behindTimed(cut func(string, []byte) bool, timeout time.Duration) *front {
	target, _ := url.Parse(r.srv.URL())
	f := &front{to: target, cut: cut, sizes: map[string][]int{}, args: map[string][]string{}}
	hs := httptest.NewServer(f)
	r.t.Cleanup(hs.Close)
	p := edge.NewPrimary(hs.URL+target.Path, func() string { return "t" }, slog.New(slog.DiscardHandler),
		edge.PrimaryOptions{Timeout: timeout, Probe: 10 * time.Millisecond, OnUp: func() { r.store.Resume(context.Background()) }})
	r.t.Cleanup(p.Close)
	r.p, r.flusher.P = p, edge.FlushTarget(p)
	return f
}

// markup is text full of the characters encoding/json's HTML escaping
// turns into six bytes each.
func markup(word string, n int) string {
	code := word + " <&> "
	return strings.Repeat(code, n/len(code)+1)[:n]
}

// Issue 26, point 3: a checkpoint of about 6.25 MB of markup reaches the
// primary as the agent sent it, under MemPalace's 16 MiB request cap, and
// lands once. Before, the send path re-encoded it with HTML escaping
// (every <, > and & six bytes): 18 MB, over the cap, cut off by the
// primary, "ambiguous" for ever.
func TestACheckpointIsSentAsTheAgentWroteIt(t *testing.T) {
	t.Parallel()
	testbed.Integration(t, "a 6 MB checkpoint through the MemPalace double takes seconds")
	r := newRig(t)
	f := r.behind(nil)
	// A bound no loaded machine reaches (ten of these under -race on two
	// cores took up to 69 s): a send cut at its timeout is sent again,
	// which is not what this test is about (slowsend_test.go is).
	r.flusher.SendTimeout = 3 * time.Minute
	items := []any{}
	for i := range 64 {
		items = append(items, map[string]any{"wing": "w", "room": "r", "content": markup(fmt.Sprintf("w%d", i), 99_000)})
	}
	// dedup_threshold 2: no item is anyone's duplicate (and the double
	// skips ranking 6 MB against itself).
	b, err := json.Marshal(map[string]any{"items": items, "dedup_threshold": 2}) // escapes HTML: made again below without
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]any{"items": items, "dedup_threshold": 2})
	payload := bytes.TrimSpace(buf.Bytes())
	if len(payload) < 6_000_000 || len(b) < 16<<20 {
		t.Fatalf("the test's checkpoint: %d bytes as written, %d escaped", len(payload), len(b))
	}
	op, err := r.store.Enqueue(context.Background(), outbox.Write{Name: "mempalace_checkpoint", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	r.drain()
	sizes := f.calls("mempalace_checkpoint")
	if len(sizes) != 1 || sizes[0] > fakepalace.MaxRequestBytes || sizes[0] > len(payload)+1024 {
		t.Errorf("checkpoint requests of %v bytes for %d bytes of arguments (cap %d)", sizes, len(payload), fakepalace.MaxRequestBytes)
	}
	if got, _ := r.store.GetByID(context.Background(), op.ID); got.State != outbox.Done {
		t.Errorf("the checkpoint's op: %s %s", got.State, got.Error)
	}
	if n := len(r.primary.Dump().Drawers); n != 64 {
		t.Errorf("%d drawers on the primary, want 64", n)
	}
}

// The arguments reach the primary byte for byte as the agent wrote them:
// its spacing, key order, escapes, and <, > and & left as they were.
func TestTheArgumentsAreSentAsWritten(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	f := r.behind(nil)
	written := `{ "content" : "if a<b && c>d { return \u00e9 }",  "room":"r", "wing":"w" }`
	if _, err := r.store.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(written)}); err != nil {
		t.Fatal(err)
	}
	event := `{"type":"note","stream":"s","room":"r","from_agent":"pi@lab","body":"<b>&</b>"}`
	if _, err := r.store.Enqueue(context.Background(), outbox.Write{Name: "mempalace_event_append", Payload: []byte(event)}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if got := f.argsOf("mempalace_add_drawer"); len(got) != 1 || got[0] != written {
		t.Errorf("the primary got %q, the agent wrote %q", got, written)
	}
	// An event carries its op id, spliced in; every other byte as written.
	if got := f.argsOf("mempalace_event_append"); len(got) != 1 || !strings.HasPrefix(got[0], event[:len(event)-1]) || !strings.Contains(got[0], `"edge_op_id"`) {
		t.Errorf("the primary got the event as %q", got)
	}
}

func (f *front) argsOf(tool string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.args[tool]...)
}

// An op that could never be sent (its arguments over the primary's cap)
// is refused when it is queued, with its size and the cap: never sent,
// never ambiguous, never in the way.
func TestAnOpOverTheCapIsRefusedWhenQueued(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	payload, _ := json.Marshal(map[string]any{"items": []any{map[string]any{"wing": "w", "room": "r", "content": strings.Repeat("x", 17<<20)}}})
	_, err := r.store.Enqueue(context.Background(), outbox.Write{Name: "mempalace_checkpoint", Payload: payload})
	var tooLarge *outbox.TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Size != len(payload) || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("enqueue of %d bytes: %v", len(payload), err)
	}
	if st, _ := r.store.Stats(context.Background()); st.Waiting() != 0 {
		t.Fatalf("the refused op was queued: %+v", st.ByState)
	}
}

// An op whose answer is lost on every send waits longer each time (its
// backoff doubles with its attempts, and the primary answering again does
// not reset it), while the writes on other objects go on. Before, every
// recovery of the breaker cleared the backoff: the op was sent again
// about once a second for as long as it kept failing, and everything
// behind it waited.
func TestAFailingOpKeepsItsBackoff(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	f := r.behind(func(tool string, body []byte) bool {
		return tool == "mempalace_add_drawer" && strings.Contains(string(body), "cut every time")
	})
	r.flusher.BaseDelay, r.flusher.MaxDelay = 50*time.Millisecond, time.Minute
	r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "cut every time"})
	r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "another drawer"})
	// The flusher runs for 0.8 s and until the other drawer has landed (or
	// 10 s): a backoff reset by every recovery resends the failing op
	// every 50 ms.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { r.flusher.Run(ctx) })
	for ctx.Err() == nil && (time.Since(start) < 800*time.Millisecond || r.primary.Dump().CountContent("another drawer") == 0) {
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	// Sent at 0, 50, 150, 350, 750 ms …: doubling from 50 ms fits
	// log2(elapsed/50ms + 1) + 1 sends in elapsed; two more for slack.
	most := int(math.Log2(float64(elapsed)/float64(50*time.Millisecond)+1)) + 3
	if n := len(f.calls("mempalace_add_drawer")) - 1; n > most {
		t.Errorf("the failing op was sent %d times in %v with a 50 ms base backoff (doubling allows %d)", n, elapsed, most)
	}
	if r.primary.Dump().CountContent("another drawer") != 1 {
		t.Error("a write on another object waited behind the failing op")
	}
}
