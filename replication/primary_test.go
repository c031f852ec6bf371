package replication

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

const upstreamToken = "tok-upstream-replication"

// faultProxy stands in front of the primary: of the writes it passes on,
// it slows some to near the callers' timeout (the primary applies them
// late; a caller that gave up does not know whether it did) and loses
// the answer of others after the primary applied them. Reads pass. It
// serves one request at a time, as MemPalace does (its request lock): a
// slow write holds back what comes after it, the look-up of a caller that
// gave up included, so no look-up overtakes a write the primary already
// has (the limit docs/replication.md names for a primary without that
// property and without a gateway).
type faultProxy struct {
	to    string
	srv   *httptest.Server
	serve sync.Mutex // MemPalace's request lock

	mu               sync.Mutex
	rng              *rand.Rand
	lost, slow       float64
	nLost, nSlow, nW int
}

func newFaultProxy(t *testing.T, to string, seed uint64) *faultProxy {
	f := &faultProxy{to: strings.TrimSuffix(to, "/mcp"), rng: rand.New(rand.NewPCG(seed, 7))}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *faultProxy) URL() string { return f.srv.URL + "/mcp" }

func (f *faultProxy) set(lost, slow float64) {
	f.mu.Lock()
	f.lost, f.slow = lost, slow
	f.mu.Unlock()
}

func (f *faultProxy) roll() (lose bool, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nW++
	if f.rng.Float64() < f.slow {
		f.nSlow++
		delay = callTimeout - 150*time.Millisecond + time.Duration(f.rng.Int64N(int64(300*time.Millisecond)))
	}
	if f.rng.Float64() < f.lost {
		f.nLost++
		lose = true
	}
	return lose, delay
}

func (f *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	lose, delay := false, time.Duration(0)
	if gjson.GetBytes(body, "method").String() == "tools/call" {
		if rec, _ := catalogue.Lookup(gjson.GetBytes(body, "params.name").String()); !rec.Reads {
			lose, delay = f.roll()
		}
	}
	f.serve.Lock()
	time.Sleep(delay)
	req, _ := http.NewRequest(r.Method, f.to+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	var answer []byte
	if err == nil {
		answer, err = io.ReadAll(resp.Body)
		resp.Body.Close() // read whole
	}
	f.serve.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if lose {
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.Close() // applied upstream; the answer never arrives
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer) // a caller that hung up: nothing to tell
}

// holds is what the primary holds of the model's records, read the way a
// client would (MemPalace's own tools), so the double and real MemPalace
// are read alike.
type holds struct {
	drawers map[string]string         // drawer id -> content (not diary entries)
	diary   map[string]map[string]int // wing -> entry suffix -> entries
	facts   map[string]int            // subject|predicate|object|open -> triples
	events  map[string]int            // body -> events
}

func readPrimary(t *testing.T, c *realpalace.Client, wings, diaryWings, subjects []string) holds {
	t.Helper()
	h := holds{drawers: map[string]string{}, diary: map[string]map[string]int{}, facts: map[string]int{}, events: map[string]int{}}
	page := func(args map[string]any, each func(row map[string]any)) {
		for offset := 0; ; {
			args["limit"], args["offset"] = 100, offset
			res := c.MustCall(t, "mempalace_list_drawers", args)
			rows, _ := res["drawers"].([]any)
			for _, x := range rows {
				each(x.(map[string]any))
			}
			offset += len(rows)
			if total, _ := res["total"].(float64); len(rows) == 0 || float64(offset) >= total {
				return
			}
		}
	}
	for _, w := range wings {
		page(map[string]any{"wing": w}, func(row map[string]any) {
			id := row["drawer_id"].(string)
			d := c.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": id})
			h.drawers[id], _ = d["content"].(string)
		})
	}
	for _, w := range diaryWings {
		h.diary[w] = map[string]int{}
		page(map[string]any{"wing": w, "room": "diary"}, func(row map[string]any) {
			if _, sfx, ok := catalogue.DiaryEntryID(row["drawer_id"].(string)); ok {
				h.diary[w][sfx]++
			}
		})
	}
	for _, s := range subjects {
		res := c.MustCall(t, "mempalace_kg_query", map[string]any{"entity": s, "direction": "outgoing"})
		facts, _ := res["facts"].([]any)
		for _, x := range facts {
			f := x.(map[string]any)
			to, _ := f["valid_to"].(string)
			h.facts[fmt.Sprint(f["subject"], "|", f["predicate"], "|", f["object"], "|", to == "")]++
		}
	}
	res := c.MustCall(t, "mempalace_event_list", map[string]any{"stream": "s", "limit": 500})
	evs, _ := res["events"].([]any)
	for _, x := range evs {
		e := x.(map[string]any)
		b, _ := e["body"].(string)
		h.events[b]++
	}
	return h
}
