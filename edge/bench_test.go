package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/testbed"
)

// BenchmarkLocalRead is a get_drawer answered by the local palace through
// the edge (edge mode, primary up).
func BenchmarkLocalRead(b *testing.B) {
	h := start(b, harnessOpts{})
	r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "bench"})
	id := r["drawer_id"]
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_get_drawer", Arguments: map[string]any{"drawer_id": id}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMergedSearch: a search answered by both palaces and merged
// (the primary has 20 ms of latency, as over a network).
func BenchmarkMergedSearch(b *testing.B) {
	h := start(b, harnessOpts{})
	for i := 0; i < 50; i++ {
		h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": fmt.Sprintf("benchmark drawer %d about outbox latency", i)})
	}
	h.eventually("replication", func() bool { return len(h.primary.Dump().Drawers) == 50 })
	h.primary.SetLatency("mempalace_search", 20*time.Millisecond)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_search", Arguments: map[string]any{"query": "outbox latency"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchDuringALongMine: a search while the local palace is at a
// mine that lasts until the benchmark ends, with the production call
// timeout (ladder.DefaultEdgeTimeout). The edge knows it sent the mine, so
// no search waits the timeout, the first included (it paid it before
// catalogue LongJob); the one before the timer warms the primary's
// connection.
func BenchmarkSearchDuringALongMine(b *testing.B) {
	h := start(b, harnessOpts{timeout: ladder.DefaultEdgeTimeout, childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_mine"}})
	ctx := context.Background()
	search := func() {
		if _, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_search", Arguments: map[string]any{"query": "outbox latency"}}); err != nil {
			b.Fatal(err)
		}
	}
	mined := make(chan error, 1)
	go func() {
		_, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_mine", Arguments: map[string]any{"source": b.TempDir()}})
		mined <- err
	}()
	h.atTheLocalPalace("mempalace_mine")
	search()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		search()
	}
	b.StopTimer()
	h.releaseLocalHold()
	if err := <-mined; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMergeSearchResults is the edge's own work on a merged search
// once both answers are in: decode both, merge, encode (no I/O). Both
// answers come from the test double holding 50 drawers each, 25 shared.
func BenchmarkMergeSearchResults(b *testing.B) {
	answer := func(pl *fakepalace.Palace) *mcp.CallToolResult {
		resp, err := pl.Handle([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"outbox latency","limit":5}}}`))
		if err != nil {
			b.Fatal(err)
		}
		var r struct{ Result json.RawMessage }
		json.Unmarshal(resp, &r)
		res, err := wire.DecodeResult(r.Result)
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	local, _ := fakepalace.New(fakepalace.Options{Dir: b.TempDir()})
	primary, _ := fakepalace.New(fakepalace.Options{Dir: b.TempDir()})
	for i := 0; i < 50; i++ {
		add := func(pl *fakepalace.Palace, n int) {
			pl.Handle([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"w","room":"r","content":"benchmark drawer %d about outbox latency"}}}`, n)))
		}
		add(local, i)
		add(primary, i+25)
	}
	lres, pres := answer(local), answer(primary)
	e := &Edge{log: slog.New(slog.DiscardHandler)}
	mk := marksFor(deviceinfo.Info{ID: "desk-9b21", Label: "desk"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lt, _ := usable(lres, nil)
		pt, _ := usable(pres, nil)
		if _, err := wire.EncodeResult(textResult(e.mergeSearch(lt, pt, 5, mk), false, nil)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeResult decodes a search answer of the test double (50
// drawers, five hits) as the edge reads the primary's and the child's.
func BenchmarkDecodeResult(b *testing.B) {
	pl, _ := fakepalace.New(fakepalace.Options{Dir: b.TempDir()})
	for i := 0; i < 50; i++ {
		pl.Handle([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"w","room":"r","content":"benchmark drawer %d about outbox latency"}}}`, i)))
	}
	resp, err := pl.Handle([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"outbox latency","limit":5}}}`))
	if err != nil {
		b.Fatal(err)
	}
	var r struct{ Result json.RawMessage }
	json.Unmarshal(resp, &r)
	b.SetBytes(int64(len(r.Result)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := wire.DecodeResult(r.Result); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWakeInitialize is an agent's initialize answered by a new edge
// process-alike (New and Serve on pipes, its child starting beside it),
// whose agent owes one ask, as a harness starting a session sees it:
// with the primary hung (it accepts and never answers), initialize is
// answered from the view the last session kept, after wakeTrustWait (no
// trusted set heard to filter it by); with the primary up, once the
// edge's first read is in.
func BenchmarkWakeInitialize(b *testing.B) {
	seed := start(b, harnessOpts{mailboxPoll: 100 * time.Millisecond})
	id := askVia(b, seed.srv.URL(), testToken, "pi@laptop", "opencode@edge-test", "owed across sessions")
	seed.eventually("the view kept", func() bool {
		return strings.Contains(seed.edge.wakeInstructions(context.Background()), id)
	})
	hung := testbed.HungPrimary(b)
	// no-wake is the same edge with no agent identity (nothing to tell):
	// what an initialize costs without the owed asks.
	for _, c := range []struct{ name, url, identity string }{{"primary-hung", hung, "opencode@edge-test"}, {"primary-up", seed.srv.URL(), "opencode@edge-test"}, {"no-wake", hung, ""}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := Config{Token: func() string { return testToken }, Child: []string{testbed.Self(b, fakepalace.ProgramName)},
				ChildEnv: append(os.Environ(), "MEMPALACE_PALACE_PATH="+seed.palace), Palace: seed.palace, Agent: "opencode", Identity: c.identity,
				PrimaryURL: c.url, CallTimeout: 30 * time.Second, Log: slog.New(slog.DiscardHandler), ChildStderr: io.Discard}
			var total time.Duration
			for b.Loop() {
				took, in := wakeOnce(b, cfg)
				if c.identity != "" && !strings.Contains(in, id) {
					b.Fatalf("instructions: %q", in)
				}
				total += took
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/initialize")
		})
	}
}

// wakeOnce starts an edge, sends initialize as a harness does, and
// returns how long the answer took and its instructions.
func wakeOnce(b *testing.B, cfg Config) (time.Duration, string) {
	e := New(cfg)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Serve(ctx, inR, outW); outW.Close(); close(done) }()
	defer func() { inW.Close(); cancel(); <-done }()
	begin := time.Now()
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`)
	var r struct {
		Result struct{ Instructions string }
	}
	if err := json.NewDecoder(outR).Decode(&r); err != nil {
		b.Fatal(err)
	}
	took := time.Since(begin)
	go io.Copy(io.Discard, outR) // whatever else it says until it stops
	return took, r.Result.Instructions
}
