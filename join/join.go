package join

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// Config is what a join runs with; cmd builds it from the ladder.
type Config struct {
	// URL is the primary (MEMPALACE_REMOTE_URL); Token its bearer source
	// (ladder.TokenSource), never stored.
	URL   string
	Token func() string
	// Child is the local server's argv and ChildEnv its environment (as
	// the edge starts it); ChildStderr gets its log lines.
	Child       []string
	ChildEnv    []string
	ChildStderr io.Writer
	// Palace is the palace directory; Home the user's home (for the
	// ~/.mempalace/knowledge_graph.sqlite3 the server may use, §7.1).
	Palace, Home string
	// Agent, Label and Device give the stamp of --origin-device
	// (Device "": nothing is stamped).
	Agent, Label, Device string
	Timeout              time.Duration
	Version              string
	Log                  *slog.Logger
}

// Options are the command's flags.
type Options struct {
	DryRun bool
	Resume bool
	Wings  []string // --wing globs
	// Verify is how many drawers and diaries to compare by content (a
	// seeded sample); All for every one.
	Verify int
	Seed   uint64
	// Stall gives up on a primary that accepts nothing for this long
	// (default 3x the call timeout, at least 30 s).
	Stall    time.Duration
	Progress *Progress
}

// All verifies every record.
const All = -1

// UsageError is a join that cannot start: no URL, no token, no local
// server, a bad flag (exit status 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usage(format string, a ...any) error { return &UsageError{fmt.Errorf(format, a...)} }

// Excluded names what the join leaves out.
type Excluded struct {
	// Wings policy.json marks local (never sent).
	Wings []string `json:"wings"`
	// Narrowed: replicated wings no --wing glob selects.
	Narrowed []string `json:"not_selected,omitempty"`
	// KnowledgeGraph: policy.json marks the knowledge graph local.
	KnowledgeGraph bool `json:"knowledge_graph,omitempty"`
}

// Report is the join's outcome (--json prints it as one object).
type Report struct {
	Sent       map[string]int `json:"sent"`
	Skipped    map[string]int `json:"skipped"`
	Excluded   Excluded       `json:"excluded"`
	Verified   int            `json:"verified"`
	Mismatches []Mismatch     `json:"mismatches"`
	Failed     []Failure      `json:"failed"`

	Target string `json:"target"`
	DryRun bool   `json:"dry_run,omitempty"`
	// Manifest: the local records selected, by type (facts split into
	// open and closed), and of them how many a previous run already sent.
	Manifest    map[string]int `json:"manifest"`
	Pending     map[string]int `json:"to_send"`
	FactsSource string         `json:"facts_source,omitempty"`
	VerifySeed  uint64         `json:"verify_seed"`
	Sampled     int            `json:"verify_sampled"`
	// Calls counts the calls made to the primary and the local palace by
	// tool (for calls per record).
	Calls map[string]int `json:"calls"`
	// Seconds is how long each phase took (read, queue, send, verify).
	Seconds    map[string]float64 `json:"seconds"`
	Checkpoint string             `json:"checkpoint,omitempty"`
	Notes      []string           `json:"notes"`
}

// OK reports a join after which everything selected is on the primary
// and what was verified matched.
func (r Report) OK() bool { return len(r.Failed) == 0 && len(r.Mismatches) == 0 }

func newReport(target string) Report {
	r := Report{Sent: map[string]int{}, Skipped: map[string]int{}, Manifest: map[string]int{}, Pending: map[string]int{}, Calls: map[string]int{}, Seconds: map[string]float64{}, Target: target, Mismatches: []Mismatch{}, Failed: []Failure{}, Excluded: Excluded{Wings: []string{}}}
	for _, k := range Kinds {
		r.Sent[k], r.Skipped[k], r.Pending[k], r.Manifest[k] = 0, 0, 0, 0
	}
	return r
}

// counter counts calls by tool.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
	side  string
	next  Caller
}

func (c *counter) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	c.mu.Lock()
	c.calls[c.side+" "+strings.TrimPrefix(tool, "mempalace_")]++
	c.mu.Unlock()
	return c.next.Call(ctx, tool, args)
}

// countingPrimary is an outbox.Primary that counts its calls.
type countingPrimary struct {
	*counter
	up func() bool
}

func (c countingPrimary) Up() bool { return c.up() }

// Target names a primary in bootstrap.json and the join outbox's file:
// the URL without query, fragment or credentials.
func Target(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// OutboxFile is the join outbox of a target inside <palace>/edge: its own
// file, so the edge's outbox and other targets' joins are untouched.
func OutboxFile(target string) string {
	sum := sha256.Sum256([]byte(target))
	return "join-outbox-" + hex.EncodeToString(sum[:])[:12] + ".sqlite"
}

// Run joins the local palace to the primary. The error is a *UsageError
// when the join could not start; any other failure is in the report.
func Run(ctx context.Context, cfg Config, o Options) (Report, error) {
	target := Target(cfg.URL)
	rep := newReport(target)
	rep.VerifySeed = o.Seed
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.URL == "":
		return rep, usage("MEMPALACE_REMOTE_URL is not set: there is no primary to join")
	case !o.DryRun && (cfg.Token == nil || cfg.Token() == ""):
		return rep, usage("MEMPALACE_REMOTE_TOKEN is not set: the primary would refuse the join")
	case len(cfg.Child) == 0:
		return rep, usage("no local server command")
	case cfg.Palace == "":
		return rep, usage("no palace directory")
	}
	stateDir := filepath.Join(cfg.Palace, "edge")
	policy, err := edge.LoadPolicy(stateDir)
	if err != nil {
		return rep, usage("%v", err)
	}
	for _, g := range o.Wings {
		if _, err := path.Match(g, "x"); err != nil {
			return rep, usage("--wing %q: bad glob: %v", g, err)
		}
	}
	stamp := ""
	if cfg.Device != "" {
		agent, label := cfg.Agent, cfg.Label
		if agent == "" {
			agent = "mcp"
		}
		if label == "" {
			label = "-"
		}
		stamp = agent + "/" + label + "/" + cfg.Device
	}
	if o.Stall <= 0 {
		o.Stall = max(3*cfg.Timeout, 30*time.Second)
	}
	obPath := filepath.Join(stateDir, OutboxFile(target))
	if o.Resume {
		if _, err := os.Stat(obPath); err != nil {
			return rep, usage("--resume: no join to %s was started on this palace (%s)", target, obPath)
		}
	}

	// The local palace, through the server the edge starts (not needed
	// to finish what an interrupted run queued).
	var local Caller
	if !o.Resume {
		cctx, stopChild := context.WithCancel(context.Background())
		child := edge.NewChild(cfg.Child, cfg.ChildEnv, log, edge.ChildOptions{Stderr: cfg.ChildStderr, Version: cfg.Version, Wait: max(cfg.Timeout, 10*time.Second)})
		childDone := make(chan struct{})
		go func() { child.Run(cctx); close(childDone) }()
		defer func() { stopChild(); <-childDone }()
		wait := max(cfg.Timeout, 10*time.Second)
		probe, cancel := context.WithTimeout(ctx, wait)
		_, err = child.Session(probe, wait)
		cancel()
		if err != nil {
			return rep, usage("no local palace server (%s): %v", cfg.Child[0], err)
		}
		local = &counter{calls: rep.Calls, side: "local", next: childCaller{child}}
	}

	var man Manifest
	phase := time.Now()
	lap := func(name string) {
		rep.Seconds[name] = float64(time.Since(phase).Milliseconds()) / 1000
		phase = time.Now()
	}
	if !o.Resume {
		o.Progress.Phase("reading the local palace", 0)
		kgFiles := []string{}
		if cfg.Home != "" && !hasPalaceFlag(cfg.Child) {
			kgFiles = append(kgFiles, filepath.Join(cfg.Home, ".mempalace", "knowledge_graph.sqlite3"))
		}
		kgFiles = append(kgFiles, filepath.Join(cfg.Palace, "knowledge_graph.sqlite3"))
		if hasPalaceFlag(cfg.Child) && cfg.Home != "" {
			kgFiles = append(kgFiles, filepath.Join(cfg.Home, ".mempalace", "knowledge_graph.sqlite3"))
		}
		man, err = readLocal(ctx, local, Selection{Policy: policy, Globs: o.Wings, Stamp: stamp}, kgReader{Files: kgFiles}, func(_ string, n int) { o.Progress.Set(n) })
		o.Progress.Done()
		if err != nil {
			rep.Failed = append(rep.Failed, Failure{Kind: "palace", Record: cfg.Palace, Error: err.Error()})
			return rep, nil
		}
		rep.Excluded = Excluded{Wings: append([]string{}, man.Excluded...), Narrowed: man.Narrowed, KnowledgeGraph: man.KGExcluded}
		rep.FactsSource = man.FactsSource
		rep.Failed = append(rep.Failed, man.Failed...)
	}
	lap("read")

	// What earlier runs queued or sent.
	var store *outbox.Store
	if !o.DryRun || exists(obPath) {
		store, err = outbox.Open(obPath, cfg.Device, cfg.Label)
		if err != nil {
			rep.Failed = append(rep.Failed, Failure{Kind: "outbox", Record: obPath, Error: err.Error()})
			return rep, nil
		}
		defer store.Close()
	}
	prior, err := priorOps(ctx, store)
	if err != nil {
		rep.Failed = append(rep.Failed, Failure{Kind: "outbox", Record: obPath, Error: err.Error()})
		return rep, nil
	}
	if o.Resume {
		// Only what an interrupted run left queued: nothing is read anew.
		for _, op := range prior {
			if op.State == outbox.Done {
				continue
			}
			var args map[string]any
			json.Unmarshal(op.Payload, &args)
			man.Records = append(man.Records, Record{Kind: kindOfTool(op.Tool), Tool: op.Tool, Args: args, Wing: op.Wing, Closed: str(args, "valid_to") != ""})
		}
		sort.Slice(man.Records, func(i, j int) bool {
			return prior[man.Records[i].key()].LocalSeq < prior[man.Records[j].key()].LocalSeq
		})
	}
	type planned struct {
		rec  Record
		op   outbox.Op
		had  bool // queued or sent by an earlier run
		sent bool // settled by an earlier run
	}
	var plan []planned
	byKey := map[string]int{}
	for _, rec := range man.Records {
		k := rec.key()
		if _, dup := byKey[k]; dup {
			continue // the same write twice (e.g. one content in two mined drawers)
		}
		byKey[k] = len(plan)
		p := planned{rec: rec}
		if op, ok := prior[k]; ok {
			p.op, p.had = op, true
			p.sent = op.State == outbox.Done && len(op.Error) == 0
		}
		plan = append(plan, p)
		kind := rec.Kind
		rep.Manifest[kind]++
		if rec.Kind == Facts {
			if rec.Closed {
				rep.Manifest["facts_closed"]++
			} else {
				rep.Manifest["facts_open"]++
			}
		}
		if !p.sent {
			rep.Pending[kind]++
		}
	}
	rep.Notes = notes(rep)
	if o.DryRun {
		rep.DryRun = true
		for _, p := range plan {
			if p.sent {
				rep.Skipped[p.rec.Kind]++
			}
		}
		return rep, nil
	}

	// Queue what no earlier run queued (a dropped op is queued again).
	cp := TargetState{State: "in_progress", Outbox: filepath.Base(obPath)}
	if st, err := readCheckpoint(cfg.Palace); err == nil {
		if prev, ok := st[target]; ok {
			cp.JoinedAt = prev.JoinedAt
			cp.HighWater = prev.HighWater
		}
	}
	toQueue := 0
	for _, p := range plan {
		if !p.had || (p.op.State == outbox.Done && len(p.op.Error) != 0) {
			toQueue++
		}
	}
	o.Progress.Phase("queuing", toQueue)
	queued := 0
	for i := range plan {
		p := &plan[i]
		if p.had && !(p.op.State == outbox.Done && len(p.op.Error) != 0) {
			continue
		}
		payload, _ := json.Marshal(p.rec.Args)
		op, err := store.Enqueue(ctx, p.rec.Tool, payload, p.rec.Wing)
		if err != nil {
			rep.Failed = append(rep.Failed, Failure{Kind: p.rec.Kind, Record: recordName(p.rec), Wing: p.rec.Wing, Error: err.Error()})
			continue
		}
		p.op, p.had, p.sent = op, true, false
		queued++
		o.Progress.Set(queued)
	}
	o.Progress.Done()
	lap("queue")
	cp.UpdatedAt = time.Now().UTC()
	if err := writeCheckpoint(cfg.Palace, target, cp); err != nil {
		log.Warn("join checkpoint not written", "err", err)
	}

	// Drain through the outbox's replay rules.
	p := edge.NewPrimary(cfg.URL, cfg.Token, log, edge.PrimaryOptions{Timeout: cfg.Timeout, Version: cfg.Version,
		OnLedger: func(on bool) { outbox.RecordProtection(store, on) }})
	defer p.Close()
	primary := countingPrimary{&counter{calls: rep.Calls, side: "primary", next: edge.FlushTarget(p)}, p.Up}
	dropped := drain(ctx, store, primary, p.State, o, log, func(hw int64) {
		cp.HighWater, cp.UpdatedAt = max(cp.HighWater, hw), time.Now().UTC()
		writeCheckpoint(cfg.Palace, target, cp)
	})
	rep.Failed = append(rep.Failed, dropped...)
	lap("send")

	// Outcome per record, from the ops as they now are.
	// The bookkeeping after the drain runs even when ctx ended (Ctrl-C):
	// the report names what stays queued.
	post := context.WithoutCancel(ctx)
	final, err := allOps(post, store)
	if err != nil {
		rep.Failed = append(rep.Failed, Failure{Kind: "outbox", Record: obPath, Error: err.Error()})
	}
	var verifyTargets []verifyTarget
	diaryWings := map[string]bool{}
	var wrote []writtenRecord // sent by this run: checked for a concurrent copy
	for _, pl := range plan {
		op, ok := final[pl.op.ID]
		if !ok {
			continue // failed to queue: already reported
		}
		var res map[string]any
		json.Unmarshal(op.Result, &res)
		switch {
		case op.State == outbox.Done && len(op.Error) == 0:
			if pl.sent || str(res, "skipped") != "" || str(res, "reason") == "already_exists" {
				rep.Skipped[pl.rec.Kind]++
			} else {
				rep.Sent[pl.rec.Kind]++
				if pl.rec.Kind == Diaries || pl.rec.Closed {
					wrote = append(wrote, writtenRecord{pl.rec, str(res, "entry_id")})
				}
			}
			if pl.rec.LocalID != "" {
				id := str(res, "drawer_id")
				if id == "" {
					id = str(res, "entry_id")
				}
				if id == "" && pl.rec.Kind == Diaries {
					diaryWings[pl.rec.Wing] = true
				}
				verifyTargets = append(verifyTargets, verifyTarget{rec: pl.rec, primaryID: id})
			}
		case op.State == outbox.Done:
			// Dropped after a refusal: already in rep.Failed (this run) or
			// left by an earlier run's failure and queued again above.
		default:
			rep.Failed = append(rep.Failed, Failure{Kind: pl.rec.Kind, Record: recordName(pl.rec), Wing: pl.rec.Wing, Error: "not sent yet (" + op.State + "): " + errText(op.Error) + "; run devbox-config join again to resume"})
		}
	}
	left := 0
	for _, op := range final {
		if op.State != outbox.Done {
			left++
		}
	}

	// Diaries and closed facts have no server guard: a copy another
	// palace's join sent at the same time is found and named, never
	// deleted.
	var listing map[string]map[string][]string
	if ctx.Err() == nil && (len(wrote) > 0 || (o.Verify != 0 && len(diaryWings) > 0)) {
		for _, w := range wrote {
			if w.rec.Kind == Diaries {
				diaryWings[w.rec.Wing] = true
			}
		}
		listing = primaryDiaryIDs(ctx, primary, diaryWings)
		rep.Mismatches = append(rep.Mismatches, concurrentCopies(ctx, primary, wrote, listing)...)
	}

	// Verification by content.
	if o.Verify != 0 && len(verifyTargets) > 0 && ctx.Err() == nil {
		for i := range verifyTargets {
			t := &verifyTargets[i]
			if ids := listing[t.rec.Wing][suffixOf(t.rec.Content)]; t.primaryID == "" && t.rec.Kind == Diaries && len(ids) > 0 {
				t.primaryID = ids[0]
			}
		}
		sort.Slice(verifyTargets, func(i, j int) bool { return verifyTargets[i].rec.LocalID < verifyTargets[j].rec.LocalID })
		picked := sample(verifyTargets, o.Verify, o.Seed)
		rep.Sampled = len(picked)
		o.Progress.Phase("verifying", len(picked))
		done := 0
		for _, t := range picked {
			v, m, f := verify(ctx, local, primary, []verifyTarget{t})
			rep.Verified += v
			rep.Mismatches = append(rep.Mismatches, m...)
			rep.Failed = append(rep.Failed, f...)
			done++
			o.Progress.Set(done)
		}
		o.Progress.Done()
		lap("verify")
	}

	// Checkpoint.
	cp.Counts = map[string]map[string]int{"sent": rep.Sent, "skipped": rep.Skipped}
	if left == 0 {
		cp.State = "complete"
		if rep.OK() {
			now := time.Now().UTC()
			cp.JoinedAt = &now
		}
		if len(final) > 0 {
			for _, op := range final {
				cp.HighWater = max(cp.HighWater, op.LocalSeq)
			}
		}
	}
	cp.UpdatedAt = time.Now().UTC()
	if err := writeCheckpoint(cfg.Palace, target, cp); err != nil {
		rep.Failed = append(rep.Failed, Failure{Kind: "checkpoint", Record: checkpointPath(cfg.Palace), Error: err.Error()})
	} else {
		rep.Checkpoint = checkpointPath(cfg.Palace)
	}
	return rep, nil
}

func hasPalaceFlag(argv []string) bool {
	for _, a := range argv[1:] {
		if a == "--palace" || strings.HasPrefix(a, "--palace=") {
			return true
		}
	}
	return false
}

func recordName(r Record) string {
	if r.LocalID != "" {
		return r.LocalID
	}
	return fmt.Sprintf("%s → %s → %s", str(r.Args, "subject"), str(r.Args, "predicate"), str(r.Args, "object"))
}

func kindOfTool(tool string) string {
	switch tool {
	case "mempalace_diary_write":
		return Diaries
	case "mempalace_kg_add":
		return Facts
	}
	return Drawers
}

func errText(raw json.RawMessage) string {
	var e struct{ Kind, Message string }
	if json.Unmarshal(raw, &e) != nil || e.Kind == "" {
		return "waiting for the ops before it"
	}
	return e.Kind + ": " + e.Message
}

func suffixOf(entry string) string {
	sum := sha256.Sum256([]byte(entry))
	return hex.EncodeToString(sum[:])[:12]
}

// primaryDiaryIDs lists the primary's diary wings once each:
// wing -> sha256(entry)[:12] suffix -> ids, sorted.
func primaryDiaryIDs(ctx context.Context, primary Caller, wings map[string]bool) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for wing := range wings {
		ids := map[string][]string{}
		for offset := 0; ; {
			page, err := primary.Call(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "limit": 100, "offset": offset})
			if err != nil || errorOf(page) != nil {
				break
			}
			rows, _ := page["drawers"].([]any)
			for _, x := range rows {
				row, _ := x.(map[string]any)
				id := str(row, "drawer_id")
				if i := strings.LastIndex(id, "_"); i >= 0 && len(id)-i-1 == 12 {
					ids[id[i+1:]] = append(ids[id[i+1:]], id)
				}
			}
			offset += len(rows)
			total, _ := page["total"].(float64)
			if len(rows) == 0 || float64(offset) >= total {
				break
			}
		}
		for _, v := range ids {
			sort.Strings(v)
		}
		out[wing] = ids
	}
	return out
}

// writtenRecord is a diary entry or closed fact this run sent.
type writtenRecord struct {
	rec Record
	id  string // diary_write's entry_id
}

// concurrentCopies finds, after the drain, a second copy of what this run
// wrote where no server guard could stop one: a diary entry whose suffix
// appears twice in its wing, a closed fact twice on its subject. Only a
// join of another palace running at the same moment makes one (the
// outbox's look-ups and lease serialize everything else). One listing per
// diary wing, one kg_query per subject.
func concurrentCopies(ctx context.Context, primary Caller, wrote []writtenRecord, listing map[string]map[string][]string) []Mismatch {
	var out []Mismatch
	subjects := map[string][]writtenRecord{}
	for _, w := range wrote {
		if w.rec.Kind == Facts {
			subjects[str(w.rec.Args, "subject")] = append(subjects[str(w.rec.Args, "subject")], w)
			continue
		}
		if ids := listing[w.rec.Wing][suffixOf(w.rec.Content)]; len(ids) > 1 {
			out = append(out, Mismatch{Kind: Diaries, LocalID: w.rec.LocalID, PrimaryID: w.id, Wing: w.rec.Wing, Verdict: "duplicate on the primary",
				Detail: fmt.Sprintf("the primary holds this entry %d times (%s): another palace joined at the same moment; keep one and delete the others there", len(ids), strings.Join(ids, ", "))})
		}
	}
	for subject, ws := range subjects {
		res, err := primary.Call(ctx, "mempalace_kg_query", map[string]any{"entity": subject, "direction": "outgoing"})
		if err != nil || errorOf(res) != nil {
			continue // the look-up says nothing either way; verification is by drawers
		}
		facts, _ := res["facts"].([]any)
		for _, w := range ws {
			n := 0
			for _, x := range facts {
				f, _ := x.(map[string]any)
				if str(f, "subject") == subject && str(f, "predicate") == str(w.rec.Args, "predicate") && str(f, "object") == str(w.rec.Args, "object") &&
					str(f, "valid_from") == str(w.rec.Args, "valid_from") && str(f, "valid_to") == str(w.rec.Args, "valid_to") {
					n++
				}
			}
			if n > 1 {
				out = append(out, Mismatch{Kind: Facts, LocalID: recordName(w.rec), Verdict: "duplicate on the primary",
					Detail: fmt.Sprintf("the primary holds this closed fact %d times: another palace joined at the same moment (closed facts have no server guard, RFC 001 §3.2)", n)})
			}
		}
	}
	return out
}

// allOps reads every op of the join outbox, by op id.
func allOps(ctx context.Context, s *outbox.Store) (map[string]outbox.Op, error) {
	out := map[string]outbox.Op{}
	if s == nil {
		return out, nil
	}
	ops, err := s.List(ctx, 1<<30, outbox.Queued, outbox.Inflight, outbox.Dead, outbox.Done)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		out[op.ID] = op
	}
	return out, nil
}

// priorOps indexes an earlier run's ops by the write they carry; of two
// ops for one write, one that reached the primary wins.
func priorOps(ctx context.Context, s *outbox.Store) (map[string]outbox.Op, error) {
	out := map[string]outbox.Op{}
	if s == nil {
		return out, nil
	}
	ops, err := allOps(ctx, s)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		var args map[string]any
		if json.Unmarshal(op.Payload, &args) != nil {
			continue
		}
		k := keyOf(op.Tool, args)
		if cur, ok := out[k]; ok && cur.State == outbox.Done && len(cur.Error) == 0 {
			continue
		}
		out[k] = op
	}
	return out, nil
}

func notes(r Report) []string {
	n := []string{}
	if r.Manifest[Diaries] > 0 {
		n = append(n, "diary entries replay verbatim: the text is their dedupe key (sha256(entry)[:12]), and their date on the primary is the join date (diary_write stamps the time it runs)")
	}
	if r.FactsSource != "" {
		n = append(n, "facts read by: "+r.FactsSource)
	}
	n = append(n, "join one palace at a time: a diary entry or closed fact that two palaces both hold can land twice if they join concurrently (no server guard, RFC 001 §7.6, §3.2); a copy found after sending is named as a mismatch")
	return n
}
