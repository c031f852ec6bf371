package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// BenchmarkTokenCheck is the cost of authenticating one request.
func BenchmarkTokenCheck(b *testing.B) {
	key := []byte("0123456789abcdef0123456789abcdef")
	cfg := &Config{SecretFile: "s", AuditLog: "a"}
	for i := 0; i < 50; i++ { // a fleet's worth of devices
		d := Device{ID: "device-" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		cfg.Devices = append(cfg.Devices, d)
	}
	tok, _ := Issue(key, &cfg.Devices[49], time.Now())
	Authenticate(cfg, key, tok, time.Now()) // first use recorded
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, _, err := Authenticate(cfg, key, tok, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

func post(b *testing.B, url, token string, body []byte) {
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var r struct{ Error any }
	json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if r.Error != nil || resp.StatusCode != 200 {
		b.Fatalf("HTTP %d %v", resp.StatusCode, r.Error)
	}
}

// BenchmarkRead compares an authorized read through the gateway with the
// same read sent to the upstream directly (a zero-latency double), side by
// side; -cpu 2 with RunParallel gives reads per second on two cores.
func BenchmarkRead(b *testing.B) {
	g := newGWB(b)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_kg_stats", "arguments": map[string]any{}}})
	upstream := g.srv.Upstream
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			post(b, upstream, upstreamToken, body)
		}
	})
	b.Run("gateway", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			post(b, g.http.URL+"/mcp", g.tokens["admin-0001"], body)
		}
	})
	b.Run("gateway-parallel", func(b *testing.B) {
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				post(b, g.http.URL+"/mcp", g.tokens["admin-0001"], body)
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reads/s")
	})
}
