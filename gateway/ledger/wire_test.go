package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
	"github.com/tidwall/gjson"
)

// front is the gateway's forward step reduced to what the ledger needs
// (no authorization: the device is a header), in front of the MemPalace
// double over HTTP.
type front struct {
	l        *Ledger
	upstream string
	client   *http.Client
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Params json.RawMessage `json:"params"`
	}
	json.Unmarshal(body, &req)
	forward := func(ctx context.Context) (Answer, error) {
		up, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.upstream, bytes.NewReader(body))
		up.Header.Set("Content-Type", "application/json")
		resp, err := f.client.Do(up)
		if err != nil {
			return Answer{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return Answer{Status: resp.StatusCode, Body: b}, err
	}
	Advertise(w.Header())
	var ans Answer
	var err error
	if op, ok, oerr := OpIDOf(req.Params); oerr != nil {
		http.Error(w, oerr.Error(), 400)
		return
	} else if ok {
		args := gjson.GetBytes(req.Params, "arguments").Raw
		sum := sha256.Sum256([]byte(args))
		ans, _, err = f.l.Do(r.Context(), Call{Device: r.Header.Get("X-Device"), OpID: op, Tool: gjson.GetBytes(req.Params, "name").String(), ArgsDigest: hex.EncodeToString(sum[:]), RequestID: req.ID}, forward)
	} else {
		ans, err = forward(r.Context())
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ans.Status)
	w.Write(ans.Body)
}

// send is one outbox send: a tools/call with the op id (none if op is "")
// from a device; it returns the tool's result object.
func send(t testing.TB, ctx context.Context, url, device, op, tool string, args map[string]any) (map[string]any, http.Header, error) {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": args}
	if op != "" {
		params["_meta"] = map[string]any{MetaKey: op}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": time.Now().UnixNano(), "method": "tools/call", "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("X-Device", device)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var res map[string]any
	json.Unmarshal([]byte(gjson.GetBytes(out, "result.content.0.text").String()), &res)
	return res, resp.Header, nil
}

func newFront(t testing.TB) (*fakepalace.Palace, string) {
	pl, up := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{})
	f := &front{l: open(t, filepath.Join(t.TempDir(), FileName), Options{}), upstream: up.URL(), client: &http.Client{Timeout: 10 * time.Second}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return pl, srv.URL
}

type tally struct{ diaries, triples, closed, events, acks, artifacts int }

func count(pl *fakepalace.Palace) tally {
	st := pl.Dump()
	var n tally
	for _, d := range st.Drawers {
		if d.Diary {
			n.diaries++
		}
	}
	for _, tr := range st.Triples {
		n.triples++
		if tr.ValidTo != nil {
			n.closed++
		}
	}
	for _, e := range st.Events {
		n.events++
		if e.Type == "event.ack" {
			n.acks++
		}
	}
	n.artifacts = len(st.Artifacts)
	return n
}

// TestEveryWriteTypeOnceThroughTheLedger sends each write type the
// replication cannot look up safely twice, as an outbox retry after a lost
// answer does, and counts the copies on the MemPalace double. Without op
// ids (the control) the same sends duplicate: the test can fail.
func TestEveryWriteTypeOnceThroughTheLedger(t *testing.T) {
	for _, withLedger := range []bool{true, false} {
		t.Run(map[bool]string{true: "ledger", false: "control"}[withLedger], func(t *testing.T) {
			pl, url := newFront(t)
			ctx := context.Background()
			n := 0
			twice := func(tool string, args map[string]any) []map[string]any {
				n++
				op := ""
				if withLedger {
					op = opID(fmt.Sprint("op", n))
				}
				var out []map[string]any
				for range 2 {
					res, h, err := send(t, ctx, url, "laptop", op, tool, args)
					if err != nil {
						t.Fatal(err)
					}
					if !Advertised(h) {
						t.Fatal("the answer does not advertise the ledger")
					}
					out = append(out, res)
				}
				return out
			}
			send(t, ctx, url, "laptop", "", "mempalace_kg_add", map[string]any{"subject": "svc", "predicate": "runs_on", "object": "host-a"})
			send(t, ctx, url, "laptop", "", "mempalace_kg_add", map[string]any{"subject": "svc", "predicate": "owned_by", "object": "ops"})
			twice("mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": "shipped the ledger"})
			twice("mempalace_kg_add", map[string]any{"subject": "svc", "predicate": "ran_on", "object": "host-0", "valid_from": "2026-01-01", "valid_to": "2026-06-01"})
			inv := twice("mempalace_kg_invalidate", map[string]any{"subject": "svc", "predicate": "owned_by", "object": "ops"})
			sup := twice("mempalace_kg_supersede", map[string]any{"subject": "svc", "predicate": "runs_on", "old_object": "host-a", "new_object": "host-b"})
			ev := twice("mempalace_event_append", map[string]any{"type": "task.open", "stream": "s", "room": "r", "from_agent": "pi@laptop", "body": "do it"})
			evID := gjson.Get(mustJSON(ev[0]), "event.id").String()
			twice("mempalace_event_ack", map[string]any{"event_id": evID, "from_agent": "pi@laptop"})
			twice("mempalace_artifact_put", map[string]any{"kind": "note", "content": "hello", "created_by": "pi@laptop"})
			twice("mempalace_patch_submit", map[string]any{"content": "--- a\n+++ b\n", "from_agent": "pi@laptop", "stream": "s"})

			got := count(pl)
			if !withLedger {
				if got.diaries < 2 || got.events < 6 || got.artifacts < 4 || got.closed < 2+2 {
					t.Fatalf("the control did not duplicate (%+v): the ledger test below proves nothing", got)
				}
				return
			}
			// triples: 2 seeds, 1 closed fact, 1 new object; events: 1 + 1 ack + 1 patch.ready.
			want := tally{diaries: 1, triples: 4, closed: 3, events: 3, acks: 1, artifacts: 2}
			if got != want {
				t.Fatalf("copies on the primary %+v, want %+v", got, want)
			}
			for _, pair := range [][]map[string]any{inv, sup, ev} {
				if pair[1]["success"] != true || mustJSON(pair[0]) != mustJSON(pair[1]) {
					t.Fatalf("the retry was not answered with the first answer:\n%v\n%v", pair[0], pair[1])
				}
			}
		})
	}
}

// TestLostAnswerBecomesAReplay: the edge gives up while the primary is
// still working (its answer is lost); the gateway still records it, and
// the edge's retry is answered without a second diary entry.
func TestLostAnswerBecomesAReplay(t *testing.T) {
	pl, url := newFront(t)
	release := make(chan struct{})
	pl.SetHold("mempalace_diary_write", release)
	op := opID("lost")
	args := map[string]any{"agent_name": "pi", "entry": "the answer to this one is lost"}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	if _, _, err := send(t, ctx, url, "laptop", op, "mempalace_diary_write", args); err == nil {
		t.Fatal("the held write answered")
	}
	cancel()
	close(release)
	pl.SetHold("mempalace_diary_write", nil)
	// The retry, after a backoff while the gateway still forwards ("in
	// flight": answered at once, not waited on), gets the recorded answer.
	var res map[string]any
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if res, _, err = send(t, context.Background(), url, "laptop", op, "mempalace_diary_write", args); err != nil || res != nil {
			break
		}
	}
	if err != nil || res["success"] != true {
		t.Fatalf("retry: %v %v", res, err)
	}
	if got := count(pl).diaries; got != 1 || pl.Calls("mempalace_diary_write") != 1 {
		t.Fatalf("%d diary entries, %d upstream calls after a lost answer and a retry", got, pl.Calls("mempalace_diary_write"))
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// BenchmarkWrite is a write (add_drawer, new content each time) through
// the forward step over HTTP to the MemPalace double, without an op id (no
// ledger) and with a fresh one (claim, forward, record). The two alternate
// op by op, so the shared machine's load falls on both alike; each reports
// its mean and median, and "added" is the difference of the means.
func BenchmarkWrite(b *testing.B) {
	_, url := newFront(b)
	ctx := context.Background()
	run := time.Now().UnixNano()
	var without, with []time.Duration
	i := 0
	for b.Loop() {
		i++
		op := ""
		if i%2 == 0 {
			op = opID(fmt.Sprint(run, i))
		}
		t := time.Now()
		res, _, err := send(b, ctx, url, "laptop", op, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": fmt.Sprint("note ", run, " ", i)})
		d := time.Since(t)
		if err != nil || res["success"] != true {
			b.Fatal(res, err)
		}
		if op == "" {
			without = append(without, d)
		} else {
			with = append(with, d)
		}
	}
	if len(with) == 0 {
		return
	}
	mean := func(d []time.Duration) float64 {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return float64(sum.Nanoseconds()) / 1000 / float64(len(d))
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1000
	}
	b.ReportMetric(mean(without), "without-mean-µs")
	b.ReportMetric(mean(with), "ledger-mean-µs")
	b.ReportMetric(mean(with)-mean(without), "added-mean-µs")
	b.ReportMetric(p50(with)-p50(without), "added-p50-µs")
}
