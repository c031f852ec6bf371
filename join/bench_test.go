package join

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkJoin: 15,000 drawers (every 50th chunked; every other one
// updated since it was filed, so its id is not its content's, as a mined
// drawer's is not: looked up on the primary by it), 1,000 diary entries
// and 500 facts (a third closed; more than kg_timeline's 100, so read from
// knowledge_graph.sqlite3) from the built test double as the local server
// to an in-process double over HTTP. One op is one whole join of a fresh
// primary; calls/record counts every call to the primary.
//
//	go test ./join -run '^$' -bench Join -benchtime 1x
func BenchmarkJoin(b *testing.B) {
	const nDrawers, nDiaries, nFacts = 15000, 1000, 500
	p := newPalace(b)
	for i := range nDrawers {
		content := fmt.Sprintf("drawer %d: a note about the build, the tests and what broke on Tuesday.", i)
		if i%50 == 0 {
			content = strings.Repeat(content+" ", 30) // ~2,100 characters: 3 chunks
		}
		id := p.do(b, "add_drawer", map[string]any{"wing": fmt.Sprintf("wing_%d", i%20), "room": fmt.Sprintf("room_%d", i%7), "content": content})["drawer_id"]
		if i%2 == 1 {
			p.do(b, "update_drawer", map[string]any{"drawer_id": id, "content": content + " Updated."})
		}
	}
	for i := range nDiaries {
		p.do(b, "diary_write", map[string]any{"agent_name": []string{"pi", "opencode"}[i%2], "entry": fmt.Sprintf("diary %d: worked on the join today.", i)})
	}
	for i := range nFacts {
		args := map[string]any{"subject": fmt.Sprintf("service %d", i%40), "predicate": "depends_on", "object": fmt.Sprintf("lib %d", i)}
		if i%3 == 0 {
			args["valid_from"], args["valid_to"] = "2025-01-01", "2025-09-30"
		}
		p.do(b, "kg_add", args)
	}
	p.save(b)
	writeKG(b, filepath.Join(p.dir, "knowledge_graph.sqlite3"), p.pl)
	records := nDrawers + nDiaries + nFacts
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		pr := newPrimary(b)
		cfg := config(b, p, pr)
		cfg.ChildStderr = nil
		cfg.Timeout = 30 * time.Second
		// A fresh palace copy's join state: each op joins from scratch.
		cfg.URL = pr.srv.URL()
		b.StartTimer()
		start := time.Now()
		rep, err := Run(context.Background(), cfg, Options{Verify: 100, Seed: 1})
		el := time.Since(start)
		b.StopTimer()
		if err != nil || !rep.OK() || rep.Sent[Drawers] != nDrawers || rep.Sent[Diaries] != nDiaries || rep.Sent[Facts] != nFacts || rep.Verified != 100 {
			b.Fatalf("join: %v sent %v failed %v mismatches %v", err, rep.Sent, rep.Failed, rep.Mismatches)
		}
		primaryCalls, localCalls := 0, 0
		for k, n := range rep.Calls {
			if strings.HasPrefix(k, "primary ") {
				primaryCalls += n
			} else {
				localCalls += n
			}
		}
		b.ReportMetric(float64(primaryCalls)/float64(records), "primary-calls/record")
		b.ReportMetric(float64(localCalls)/float64(records), "local-calls/record")
		b.ReportMetric(el.Seconds(), "s/join")
		b.Logf("%d records in %v (phases, s: %v); calls %v; facts: %s", records, el.Round(time.Millisecond), rep.Seconds, rep.Calls, rep.FactsSource)
		b.StartTimer()
	}
}
