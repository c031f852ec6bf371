package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed"
)

// benchPath is one way to the primary, with a running flusher on an
// outbox of its own.
type benchPath struct {
	name  string
	s     *outbox.Store
	delay []time.Duration
}

// newPath starts a flusher (Run, as the edge runs it) on a fresh outbox,
// sending to url with tok.
func newPath(b *testing.B, name, url, tok string) *benchPath {
	s, err := outbox.Open(filepath.Join(b.TempDir(), outbox.FileName), "dev1", "lab")
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	p := edge.NewPrimary(url, func() string { return tok }, log, edge.PrimaryOptions{Timeout: 20 * time.Second, OnUp: func() { s.Resume(context.Background()) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&outbox.Flusher{S: s, P: edge.FlushTarget(p), Log: log, SendTimeout: 40 * time.Second}).Run(ctx)
	}()
	b.Cleanup(func() { cancel(); <-done; p.Close(); s.Close() })
	return &benchPath{name: name, s: s}
}

// benchGateway is a gateway (with its op-id ledger) in front of url, in
// process, and a token of device dev1.
func benchGateway(b *testing.B, url string) (string, string) {
	dir := b.TempDir()
	cfg := &gateway.Config{SecretFile: filepath.Join(dir, "secret"), AuditLog: filepath.Join(dir, "audit.jsonl"),
		Devices: []gateway.Device{{ID: "dev1", Label: "lab", Read: []string{"*"}, Write: []string{"*"}, KG: gateway.KGWrite, Agents: []string{"pi@lab"}, ReadRate: 1e6, WriteRate: 1e6}}}
	key, err := gateway.LoadSecret(cfg)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := gateway.Issue(key, &cfg.Devices[0], time.Now())
	if err != nil {
		b.Fatal(err)
	}
	if err := cfg.Save(filepath.Join(dir, "gateway.jsonc")); err != nil {
		b.Fatal(err)
	}
	l, err := ledger.Open(filepath.Join(dir, ledger.FileName), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	log := slog.New(slog.DiscardHandler)
	g := &gateway.Server{ConfigFile: filepath.Join(dir, "gateway.jsonc"), Upstream: url, UpstreamToken: func() string { return "t" }, BindHost: "127.0.0.1", Log: log, Ledger: gateway.OpLedger{L: l, Log: log}}
	if err := g.Open(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { // its trash and provenance index, after the server (LIFO)
		if err := g.Close(); err != nil {
			b.Error(err)
		}
	})
	hs := httptest.NewServer(g)
	b.Cleanup(hs.Close)
	return hs.URL + "/mcp", tok
}

// timed queues w and notes how long it took to be done.
func (p *benchPath) timed(b *testing.B, w outbox.Write) {
	t := time.Now()
	op, err := p.s.Enqueue(context.Background(), w)
	if err != nil {
		b.Fatal(err)
	}
	for {
		o, err := p.s.Wait(context.Background(), op.ID)
		if err != nil || o.State == outbox.Done {
			break
		}
		if o.State != outbox.Queued && o.State != outbox.Inflight {
			b.Fatalf("%s: %s %s", p.name, o.State, o.Error)
		}
	}
	p.delay = append(p.delay, time.Since(t))
}

func quantile(d []time.Duration, q float64) float64 {
	d = slices.Clone(d)
	slices.Sort(d)
	return float64(d[int(float64(len(d)-1)*q)].Microseconds()) / 1000
}

// BenchmarkReplicationDelay: the time from a write's enqueue (as the
// edge queues it after the local palace took it) until its op is done on
// the primary, with the primary reachable and a flusher running (asleep
// between writes: the doorbell wakes it). Straight to the MemPalace double
// over HTTP, and through a gateway with its op-id ledger, alternating op
// by op; a drawer and an event (the coordination lane) each time.
func BenchmarkReplicationDelay(b *testing.B) {
	_, srv := testbed.Primary(b, fakepalace.Options{}, fakepalace.HTTPOptions{Token: "t"})
	gwURL, gwTok := benchGateway(b, srv.URL())
	paths := []*benchPath{newPath(b, "direct", srv.URL(), "t"), newPath(b, "gateway", gwURL, gwTok)}
	for i := 0; b.Loop(); i++ {
		for _, p := range paths {
			for _, w := range []outbox.Write{
				{Name: "mempalace_add_drawer", Payload: []byte(fmt.Sprintf(`{"wing":"w","room":"r","content":"delay %s %d"}`, p.name, i))},
				{Name: "mempalace_event_append", Payload: []byte(fmt.Sprintf(`{"type":"note","stream":"s","room":"r","from_agent":"pi@lab","body":"delay %s %d"}`, p.name, i))},
			} {
				p.timed(b, w)
			}
		}
	}
	for _, p := range paths {
		b.ReportMetric(quantile(p.delay, 0.5), p.name+"-p50-ms")
		b.ReportMetric(quantile(p.delay, 0.99), p.name+"-p99-ms")
	}
}

// BenchmarkCheckpoint6MB: a 6.3 MB checkpoint of markup (64 items near
// MemPalace's content limit, every third character one that HTML escaping
// makes six bytes) from enqueue until done, straight and through the
// gateway, alternating; the bytes on the wire are the agent's.
func BenchmarkCheckpoint6MB(b *testing.B) {
	_, srv := testbed.Primary(b, fakepalace.Options{}, fakepalace.HTTPOptions{Token: "t"})
	gwURL, gwTok := benchGateway(b, srv.URL())
	paths := []*benchPath{newPath(b, "direct", srv.URL(), "t"), newPath(b, "gateway", gwURL, gwTok)}
	size := 0
	for i := 0; b.Loop(); i++ {
		for _, p := range paths {
			items := []any{}
			for j := range 64 {
				items = append(items, map[string]any{"wing": "w", "room": "r", "content": markup(fmt.Sprintf("%s%d-%d", p.name, i, j), 99_000)})
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.Encode(map[string]any{"items": items, "dedup_threshold": 2})
			size = buf.Len()
			p.timed(b, outbox.Write{Name: "mempalace_checkpoint", Payload: bytes.TrimSpace(buf.Bytes())})
		}
	}
	b.ReportMetric(float64(size)/1e6, "checkpoint-MB")
	for _, p := range paths {
		b.ReportMetric(quantile(p.delay, 0.5), p.name+"-p50-ms")
	}
}
