package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// modelConfig is one kind of run.
type modelConfig struct {
	steps     int
	gateway   bool // through a gateway with its op-id ledger (a process); else straight to the primary
	artifacts bool // artifact_put in the schedule (the double alone can be checked for them)
	big       bool // drawers near MemPalace's 100,000-character content limit
	settle    time.Duration
}

// seeds is how many seeds a run tries: REPLICATION_SEEDS, else def.
func seeds(def int) []uint64 {
	if s, err := strconv.ParseUint(os.Getenv("REPLICATION_SEED"), 10, 64); err == nil {
		return []uint64{s}
	}
	n := def
	if v, err := strconv.Atoi(os.Getenv("REPLICATION_SEEDS")); err == nil && v > 0 {
		n = v
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// TestModel runs random schedules against the MemPalace double: one short
// seed in the unit tier, 200 in the integration tier (REPLICATION_SEEDS
// for more: the benchmark run).
func TestModel(t *testing.T) {
	n, steps := 200, 70
	if testing.Short() {
		n, steps = 1, 25
	}
	for _, seed := range seeds(n) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			if !testing.Short() {
				t.Parallel()
			}
			cfg := modelConfig{steps: steps, gateway: seed%4 != 0, artifacts: true, big: seed%5 == 0, settle: 40 * time.Second}
			pl, srv := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: upstreamToken})
			runModel(t, seed, cfg, srv.URL(), pl)
		})
	}
}

// TestRealModel runs about ten seeds against real MemPalace (integration
// tier, scripts/test's real-MemPalace step).
func TestRealModel(t *testing.T) {
	testbed.Integration(t, "real MemPalace")
	for _, seed := range seeds(10) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			srv := realpalace.New(t).Serve(t, upstreamToken)
			runModel(t, seed, modelConfig{steps: 45, gateway: seed%3 != 0, settle: 3 * time.Minute}, srv.URL, nil)
		})
	}
}

// world is one run: the primary behind its fault proxy, the gateway, two
// palaces with their outboxes and flushers, and what the model expects.
type world struct {
	t       *testing.T
	cfg     modelConfig
	rng     *rand.Rand
	dir     string
	proxy   *faultProxy
	reader  *realpalace.Client // the primary, read directly
	fake    *fakepalace.Palace // nil for real MemPalace
	gw      *testbed.Proc
	gwVars  map[string]string
	target  string // where the flushers send
	token   string
	palaces []*palace
	asks    []string // events a third party addressed to the palaces' agents
	log     []string // the schedule, as it ran
}

// palace is one palace's outbox, its flushers and the model of its writes.
type palace struct {
	name, agent, diaryAgent, wing string
	path                          string
	st                            *outbox.Store
	flushers                      []*testbed.Proc
	n                             int
	drawers                       map[string]string // id -> content
	drawerIDs                     []string
	open                          map[string]string // subject -> open object
	facts                         map[string]int    // subject|predicate|object|open
	diary                         map[string]int    // entry suffix -> entries
	events, artifacts             map[string]int
	refused                       map[string]bool // op ids the primary must refuse
	ops                           []string
}

func runModel(t *testing.T, seed uint64, cfg modelConfig, primaryURL string, fake *fakepalace.Palace) {
	w := &world{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(seed, 26)), dir: t.TempDir(), fake: fake, reader: realpalace.HTTPClient(primaryURL, upstreamToken)}
	t.Logf("replay: REPLICATION_SEED=%d go test ./replication -run '%s'", seed, t.Name())
	w.proxy = newFaultProxy(t, primaryURL, seed)
	w.target, w.token = w.proxy.URL(), upstreamToken
	if cfg.gateway {
		w.startGateway()
	}
	for i, name := range []string{"a", "b"} {
		p := &palace{name: name, agent: []string{"pi@lab", "oc@lab"}[i], diaryAgent: []string{"pi", "oc"}[i], wing: "w" + name,
			path: filepath.Join(w.dir, name, "edge", outbox.FileName), drawers: map[string]string{}, open: map[string]string{},
			facts: map[string]int{}, diary: map[string]int{}, events: map[string]int{}, artifacts: map[string]int{}, refused: map[string]bool{}}
		st, err := outbox.Open(p.path, "dev1", "lab")
		if err != nil {
			t.Fatal(err)
		}
		p.st = st
		t.Cleanup(func() { st.Close() })
		w.palaces = append(w.palaces, p)
		w.startFlusher(p)
	}
	t.Cleanup(w.stopAll)
	for i := range 3 {
		res := w.reader.MustCall(t, "mempalace_event_append", map[string]any{"type": "ask", "stream": "s", "room": "r", "from_agent": "lead@x", "to_agent": "*", "body": fmt.Sprint("ask ", i)})
		w.asks = append(w.asks, res["event"].(map[string]any)["id"].(string))
	}
	for range cfg.steps {
		w.step()
	}
	w.settle()
	if t.Failed() {
		t.Logf("schedule:\n%s", strings.Join(w.log, "\n"))
	}
}

func (w *world) logf(format string, a ...any) { w.log = append(w.log, fmt.Sprintf(format, a...)) }

// step does one random thing.
func (w *world) step() {
	p := w.palaces[w.rng.IntN(2)]
	switch r := w.rng.IntN(100); {
	case r < 8 && len(p.flushers) < 3:
		w.logf("start a flusher on %s", p.name)
		w.startFlusher(p)
	case r < 14 && len(p.flushers) > 0:
		i := w.rng.IntN(len(p.flushers))
		w.logf("SIGKILL flusher %d of %s", i, p.name)
		p.flushers[i].Kill()
		p.flushers = slices.Delete(p.flushers, i, i+1)
	case r < 17 && w.cfg.gateway && w.gw != nil:
		w.logf("SIGKILL the gateway")
		w.gw.Kill()
		w.gw = nil
	case r < 22 && w.cfg.gateway && w.gw == nil:
		w.logf("restart the gateway")
		w.restartGateway()
	case r < 28:
		lost, slow := []float64{0, 0.1, 0.3}[w.rng.IntN(3)], []float64{0, 0.1, 0.3}[w.rng.IntN(3)]
		w.logf("faults: lose %.0f%% of write answers, slow %.0f%%", lost*100, slow*100)
		w.proxy.set(lost, slow)
	case r < 36:
		d := time.Duration(10+w.rng.IntN(70)) * time.Millisecond
		w.logf("pause %s", d)
		time.Sleep(d)
	default:
		w.write(p)
	}
}

// write queues one write of a random type in p's outbox, as the edge
// would after the local palace took it, and notes what the primary must
// then hold.
func (w *world) write(p *palace) {
	p.n++
	uniq := fmt.Sprintf("%s-%d", p.name, p.n)
	var tool string
	var args map[string]any
	refused := false
	switch r := w.rng.IntN(100); {
	case r < 20:
		content := "drawer " + uniq
		if w.cfg.big && w.rng.IntN(4) == 0 {
			content += " " + strings.Repeat("long text near the limit ", 3500+w.rng.IntN(400))
		}
		tool, args = "add_drawer", map[string]any{"wing": p.wing, "room": "r", "content": content}
		p.addDrawer(content)
	case r < 28 && len(p.drawerIDs) > 0:
		id := p.drawerIDs[w.rng.IntN(len(p.drawerIDs))]
		content := "updated " + uniq
		tool, args = "update_drawer", map[string]any{"drawer_id": id, "content": content}
		p.drawers[id] = content
	case r < 34:
		c1, c2 := "item one "+uniq, "item two "+uniq
		entry := p.diaryText(w.rng, uniq)
		tool, args = "checkpoint", map[string]any{"items": []any{map[string]any{"wing": p.wing, "room": "r", "content": c1}, map[string]any{"wing": p.wing, "room": "r", "content": c2}},
			"diary": map[string]any{"agent_name": p.diaryAgent, "entry": entry}, "dedup_threshold": 2}
		p.addDrawer(c1)
		p.addDrawer(c2)
		p.diary[catalogue.EntrySuffix(entry)]++
	case r < 50:
		entry := p.diaryText(w.rng, uniq)
		tool, args = "diary_write", map[string]any{"agent_name": p.diaryAgent, "entry": entry}
		p.diary[catalogue.EntrySuffix(entry)]++
	case r < 70:
		tool, args = p.kgOp(w.rng)
	case r < 80:
		tool, args = "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": p.agent, "body": "event " + uniq}
		if w.rng.IntN(3) == 0 {
			args["correlation_id"] = w.asks[w.rng.IntN(len(w.asks))]
		}
		p.events["event "+uniq]++
	case r < 88:
		tool, args = "event_ack", map[string]any{"event_id": w.asks[w.rng.IntN(len(w.asks))], "from_agent": p.agent, "status": []string{"claimed", "applied"}[w.rng.IntN(2)], "body": "ack " + uniq}
		p.events["ack "+uniq]++
	case r < 94 && w.cfg.artifacts:
		tool, args = "artifact_put", map[string]any{"kind": "note", "content": "artifact " + uniq, "created_by": p.agent}
		p.artifacts["artifact "+uniq]++
	case r < 97:
		// A write the primary refuses: a wing the device may not write
		// (the gateway's denial), or a name MemPalace does not take.
		wing := "forbidden"
		if !w.cfg.gateway {
			wing = "bad/wing"
		}
		tool, args, refused = "add_drawer", map[string]any{"wing": wing, "room": "r", "content": "refused " + uniq}, true
	default:
		tool, args = p.kgOp(w.rng)
	}
	b, err := json.Marshal(args)
	if err != nil {
		w.t.Fatal(err)
	}
	op, err := p.st.Enqueue(context.Background(), outbox.Write{Name: catalogue.Prefix + tool, Payload: b})
	if err != nil {
		w.t.Fatalf("enqueue %s: %v", tool, err)
	}
	if refused {
		p.refused[op.ID] = true
	}
	p.ops = append(p.ops, op.ID)
	w.logf("%s writes %s %s (op %s)", p.name, tool, b[:min(len(b), 120)], op.Short())
}

func (p *palace) addDrawer(content string) {
	id := catalogue.DrawerID(p.wing, "r", content)
	p.drawers[id] = content
	p.drawerIDs = append(p.drawerIDs, id)
}

// diaryText is a text that repeats (the same standup, day after day) or
// one of its own.
func (p *palace) diaryText(rng *rand.Rand, uniq string) string {
	if rng.IntN(2) == 0 {
		return []string{"standup: nothing new", "standup: reviewed the patch"}[rng.IntN(2)]
	}
	return "diary " + uniq
}

// kgOp asserts, closes or supersedes a fact of one of p's subjects, as
// the model's graph allows, and notes the triples it leaves.
func (p *palace) kgOp(rng *rand.Rand) (string, map[string]any) {
	subject := fmt.Sprintf("%s-subject-%d", p.name, rng.IntN(2))
	key := func(o string, open bool) string { return fmt.Sprint(subject, "|works_at|", o, "|", open) }
	old := p.open[subject]
	pick := func() string {
		for {
			if o := fmt.Sprint("org-", rng.IntN(4)); o != old {
				return o
			}
		}
	}
	switch {
	case old == "":
		o := pick()
		p.open[subject] = o
		p.facts[key(o, true)]++
		return "kg_add", map[string]any{"subject": subject, "predicate": "works_at", "object": o}
	case rng.IntN(2) == 0:
		delete(p.open, subject)
		p.facts[key(old, true)]--
		p.facts[key(old, false)]++
		return "kg_invalidate", map[string]any{"subject": subject, "predicate": "works_at", "object": old, "ended": "2026-06-01"}
	}
	o := pick()
	p.open[subject] = o
	p.facts[key(old, true)]--
	p.facts[key(old, false)]++
	p.facts[key(o, true)]++
	return "kg_supersede", map[string]any{"subject": subject, "predicate": "works_at", "old_object": old, "new_object": o, "at": "2026-06-01"}
}

// settle ends the faults, brings every part back, waits for every op to
// settle, settles the ops in doubt as an operator would, and checks.
func (w *world) settle() {
	w.proxy.set(0, 0)
	w.logf("settle: faults off, every part up")
	if w.cfg.gateway && w.gw == nil {
		w.restartGateway()
	}
	for _, p := range w.palaces {
		if len(p.flushers) == 0 {
			w.startFlusher(p)
		}
	}
	deadline := time.Now().Add(w.cfg.settle)
	for _, p := range w.palaces {
		w.waitSettled(p, deadline)
		w.operator(p)
		w.waitSettled(p, deadline)
	}
	w.check()
}

// waitSettled waits until none of p's ops is queued or in flight.
func (w *world) waitSettled(p *palace, deadline time.Time) {
	for {
		st, err := p.st.Stats(context.Background())
		if err != nil {
			w.t.Fatal(err)
		}
		if st.ByState[outbox.Queued]+st.ByState[outbox.Inflight] == 0 {
			return
		}
		if time.Now().After(deadline) {
			ops, _ := p.st.List(context.Background(), 20, outbox.Queued, outbox.Inflight)
			for _, o := range ops {
				w.t.Logf("still %s: %s %s %s", o.State, o.Short(), o.Tool, o.Error)
			}
			for i, f := range p.flushers {
				w.t.Logf("flusher %d of %s:\n%s", i, p.name, f.Log())
			}
			w.t.Fatalf("palace %s: %d ops not settled after %s (%v)", p.name, st.ByState[outbox.Queued]+st.ByState[outbox.Inflight], w.cfg.settle, st.ByState)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// operator settles each op in doubt as the two commands do, after
// looking at the primary: delivered if the artifact is there, else sent
// again.
func (w *world) operator(p *palace) {
	ctx := context.Background()
	ops, err := p.st.List(ctx, 1000, outbox.InDoubt)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, o := range ops {
		var a map[string]any
		json.Unmarshal(o.Payload, &a)
		there := false
		if w.fake != nil {
			for _, x := range w.fake.Dump().Artifacts {
				there = there || x.Content == a["content"]
			}
		}
		w.logf("operator: %s %s in doubt; on the primary: %v", o.Short(), o.Tool, there)
		if there {
			_, err = p.st.Delivered(ctx, o.ID)
		} else {
			_, err = p.st.Retry(ctx, o.ID)
		}
		if err != nil {
			w.t.Fatal(err)
		}
	}
}

// check compares the primary with the model, and the outboxes with what
// the primary refused.
func (w *world) check() {
	t := w.t
	var wings, diaryWings, subjects []string
	want := holds{drawers: map[string]string{}, diary: map[string]map[string]int{}, facts: map[string]int{}, events: map[string]int{}}
	wantArtifacts := map[string]int{}
	for _, a := range []string{"ask 0", "ask 1", "ask 2"} {
		want.events[a] = 1
	}
	for _, p := range w.palaces {
		wings, subjects = append(wings, p.wing), append(subjects, p.name+"-subject-0", p.name+"-subject-1")
		dw := catalogue.DiaryWingOf(p.diaryAgent)
		diaryWings = append(diaryWings, dw)
		want.diary[dw] = map[string]int{}
		for k, v := range p.drawers {
			want.drawers[k] = v
		}
		for k, v := range p.diary {
			want.diary[dw][k] = v
		}
		for k, v := range p.facts {
			if v != 0 {
				want.facts[k] = v
			}
		}
		for k, v := range p.events {
			want.events[k] = v
		}
		for k, v := range p.artifacts {
			wantArtifacts[k] = v
		}
	}
	got := readPrimary(t, w.reader, append(wings, "forbidden"), diaryWings, subjects)
	diff := func(what string, want, got map[string]int) {
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s %.80q: %d on the primary, want %d", what, k, got[k], n)
			}
		}
		for k, n := range got {
			if _, ok := want[k]; !ok && n != 0 {
				t.Errorf("%s %.80q: %d on the primary, want none", what, k, n)
			}
		}
	}
	for id, c := range want.drawers {
		if g, ok := got.drawers[id]; !ok {
			t.Errorf("drawer %s (%.60q) lost", id, c)
		} else if g != c {
			t.Errorf("drawer %s holds %.60q, want %.60q", id, g, c)
		}
	}
	for id, c := range got.drawers {
		if _, ok := want.drawers[id]; !ok {
			t.Errorf("drawer %s (%.60q) on the primary, not in the model", id, c)
		}
	}
	for _, dw := range diaryWings {
		diff("diary "+dw, want.diary[dw], got.diary[dw])
	}
	diff("fact", want.facts, got.facts)
	diff("event", want.events, got.events)
	if w.fake != nil {
		gotArtifacts := map[string]int{}
		for _, a := range w.fake.Dump().Artifacts {
			gotArtifacts[a.Content]++
		}
		diff("artifact", wantArtifacts, gotArtifacts)
	}
	for _, p := range w.palaces {
		for _, id := range p.ops {
			o, err := p.st.GetByID(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case p.refused[id] && o.State != outbox.Dead:
				t.Errorf("palace %s op %s (refused by the primary): %s, want dead", p.name, o.Short(), o.State)
			case !p.refused[id] && o.State != outbox.Done:
				t.Errorf("palace %s op %s %s: %s (%s), want done: nothing it shares an object with was refused", p.name, o.Short(), o.Tool, o.State, o.Error)
			}
		}
	}
	if t.Failed() {
		f := w.proxy
		t.Logf("proxy: %d writes, %d answers lost, %d slowed", f.nW, f.nLost, f.nSlow)
	}
}

// startGateway configures device dev1 (both palaces' device, with one
// token) and starts the gateway process.
func (w *world) startGateway() {
	t := w.t
	dir := filepath.Join(w.dir, "gateway")
	cfg := &gateway.Config{SecretFile: filepath.Join(dir, "secret"), AuditLog: filepath.Join(dir, "audit.jsonl"),
		Devices: []gateway.Device{{ID: "dev1", Label: "lab", Read: []string{"*"}, Write: []string{"wa", "wb", "wing_*"}, KG: gateway.KGWrite,
			Agents: []string{"pi@lab", "oc@lab"}, ReadRate: 1e6, WriteRate: 1e6}}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := gateway.LoadSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.token, err = gateway.Issue(key, &cfg.Devices[0], time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Save(filepath.Join(dir, "gateway.jsonc")); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + freePort(t)
	w.gwVars = map[string]string{"CONFIG": filepath.Join(dir, "gateway.jsonc"), "UPSTREAM": w.proxy.URL(), "LISTEN": addr, "LEDGER": filepath.Join(dir, "op-ledger.sqlite")}
	w.target = "http://" + addr + "/mcp"
	w.restartGateway()
}

func (w *world) restartGateway() { w.gw = start(w.t, "gateway", "listening", w.gwVars) }

func (w *world) startFlusher(p *palace) {
	p.flushers = append(p.flushers, start(w.t, "flusher", "flushing", map[string]string{"OUTBOX": p.path, "PRIMARY": w.target, "TOKEN": w.token}))
}

// stopAll stops every process the run started.
func (w *world) stopAll() {
	for _, p := range w.palaces {
		for _, f := range p.flushers {
			f.Stop()
		}
		p.flushers = nil
	}
	if w.gw != nil {
		w.gw.Kill()
		w.gw = nil
	}
}
