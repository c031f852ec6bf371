package join

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

const testToken = "tok-JOIN-secret-123"

// call runs one tool on an in-process palace and returns its JSON answer.
func call(t testing.TB, pl *fakepalace.Palace, tool string, args map[string]any) map[string]any {
	t.Helper()
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	out, err := pl.Handle(msg)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
		Error any `json:"error"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.Error != nil || len(resp.Result.Content) == 0 {
		t.Fatalf("%s: %s", tool, out)
	}
	var m map[string]any
	json.Unmarshal([]byte(resp.Result.Content[0].Text), &m)
	return m
}

// palace is a local palace for the built test double (cmd/fakepalace as
// mempalace-mcp): filled in memory, written once as its state file.
type palace struct {
	dir string
	pl  *fakepalace.Palace
}

func newPalace(t testing.TB) *palace {
	t.Helper()
	pl, err := fakepalace.New(fakepalace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &palace{dir: filepath.Join(t.TempDir(), "palace"), pl: pl}
}

func (p *palace) do(t testing.TB, tool string, args map[string]any) map[string]any {
	t.Helper()
	return call(t, p.pl, "mempalace_"+tool, args)
}

// save writes the palace state where the local server reads it.
func (p *palace) save(t testing.TB) {
	t.Helper()
	os.MkdirAll(p.dir, 0o700)
	b, err := json.Marshal(p.pl.Dump())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "fakepalace.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (p *palace) policy(t testing.TB, js string) {
	os.MkdirAll(filepath.Join(p.dir, "edge"), 0o700)
	if err := os.WriteFile(filepath.Join(p.dir, "edge", "policy.json"), []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
}

type primary struct {
	pl  *fakepalace.Palace
	srv *fakepalace.HTTPServer
}

func newPrimary(t testing.TB) *primary {
	t.Helper()
	pl, srv := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: testToken})
	return &primary{pl, srv}
}

func config(t testing.TB, p *palace, pr *primary) Config {
	t.Helper()
	child := testbed.Self(t, fakepalace.ProgramName)
	return Config{
		URL: pr.srv.URL(), Token: func() string { return testToken }, Child: []string{child},
		ChildEnv: append(os.Environ(), "MEMPALACE_PALACE_PATH="+p.dir), ChildStderr: os.Stderr,
		Palace: p.dir, Home: t.TempDir(), Agent: "opencode", Label: "lab", Timeout: 5 * time.Second,
	}
}

func run(t testing.TB, cfg Config, o Options) Report {
	t.Helper()
	rep, err := Run(context.Background(), cfg, o)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	return rep
}

func long(prefix string, n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%s line %d of a long note. ", prefix, b.Len())
	}
	return b.String()[:n]
}

// fill gives a palace drawers (one chunked), diaries, open and closed
// facts, and a wing the policy will mark local.
func fill(t testing.TB, p *palace, tag string) {
	for i := range 5 {
		p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("%s note %d", tag, i)})
	}
	p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "shared note", "added_by": "pi"})
	p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "big", "content": long(tag+" chunked", 2100)})
	p.do(t, "add_drawer", map[string]any{"wing": "workspace", "room": "mined", "content": tag + " mined file, local only"})
	p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": tag + " diary entry"})
	p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "shared diary entry"})
	p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": long("shared chunked diary", 1700)})
	p.do(t, "kg_add", map[string]any{"subject": "Alice", "predicate": "works_on", "object": "devbox"})
	p.do(t, "kg_add", map[string]any{"subject": tag, "predicate": "uses", "object": "go"})
	p.do(t, "kg_add", map[string]any{"subject": "Alice", "predicate": "lived_in", "object": "Oslo", "valid_from": "2020-01-01", "valid_to": "2023-06-30"})
	p.do(t, "kg_add", map[string]any{"subject": tag, "predicate": "ran", "object": "3.6.0", "valid_from": "2026-01-01", "valid_to": "2026-05-01"})
}

const localWorkspace = `{"version": 1, "wings": {"workspace": {"replicate": "local"}}}`

// exactlyOnce checks that the primary holds every drawer content, diary
// entry and fact at most once and that nothing from a local wing arrived.
func exactlyOnce(t testing.TB, pr *primary) *fakepalace.State {
	t.Helper()
	st := pr.pl.Dump()
	seen := map[string]int{}
	for _, d := range st.Drawers {
		if d.Wing == "workspace" {
			t.Errorf("a local-policy wing reached the primary: %s", d.ID)
		}
		seen[d.Wing+"|"+d.Room+"|"+d.Content]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("primary holds %d copies of %.60q", n, k)
		}
	}
	facts := map[string]int{}
	for _, tr := range st.Triples {
		facts[fmt.Sprint(tr.Subject, tr.Predicate, tr.Object, deref(tr.ValidFrom), deref(tr.ValidTo))]++
	}
	for k, n := range facts {
		if n != 1 {
			t.Errorf("primary holds %d copies of the fact %s", n, k)
		}
	}
	return st
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func writes(pr *primary) int {
	n := 0
	for _, tool := range []string{"mempalace_add_drawer", "mempalace_diary_write", "mempalace_kg_add"} {
		n += pr.pl.Calls(tool)
	}
	return n
}

func TestJoinTwiceSendsNothing(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	cfg := config(t, p, pr)
	rep := run(t, cfg, Options{Verify: All, Seed: 7})
	if !rep.OK() {
		t.Fatalf("first join failed: %+v", rep)
	}
	if rep.Sent[Drawers] != 7 || rep.Sent[Diaries] != 3 || rep.Sent[Facts] != 4 {
		t.Fatalf("first join sent %v, want drawers 7, diaries 3, facts 4", rep.Sent)
	}
	if rep.Verified != 10 || rep.Sampled != 10 {
		t.Fatalf("verified %d of %d, want all 10 drawers and diaries", rep.Verified, rep.Sampled)
	}
	if strings.Join(rep.Excluded.Wings, ",") != "workspace" {
		t.Fatalf("excluded %v", rep.Excluded)
	}
	st := exactlyOnce(t, pr)
	if len(st.Drawers) != 10 || len(st.Triples) != 4 {
		t.Fatalf("primary holds %d drawers and %d facts, want 10 and 4", len(st.Drawers), len(st.Triples))
	}
	// list_drawers shows 200 characters; the whole drawer must arrive.
	whole := false
	for _, d := range st.Drawers {
		if d.Content == long("a chunked", 2100) {
			whole = len(d.ChunkIDs()) == 3
		}
		if !d.Diary && strings.HasSuffix(d.Content, "...") {
			t.Errorf("a preview was replayed instead of the drawer: %.60q", d.Content)
		}
	}
	if !whole {
		t.Fatal("the 2,100-character drawer did not arrive whole (3 chunks)")
	}
	cp, err := readCheckpoint(p.dir)
	if err != nil || cp[rep.Target].State != "complete" || cp[rep.Target].JoinedAt == nil || cp[rep.Target].HighWater < 14 {
		t.Fatalf("bootstrap.json: %+v %v", cp, err)
	}

	before := writes(pr)
	rep2 := run(t, cfg, Options{Verify: 3, Seed: 7})
	if !rep2.OK() {
		t.Fatalf("second join: %+v", rep2)
	}
	for _, k := range Kinds {
		if rep2.Sent[k] != 0 {
			t.Fatalf("second join sent %v", rep2.Sent)
		}
	}
	if rep2.Skipped[Drawers] != 7 || rep2.Skipped[Diaries] != 3 || rep2.Skipped[Facts] != 4 {
		t.Fatalf("second join skipped %v", rep2.Skipped)
	}
	if writes(pr) != before {
		t.Fatalf("the second join wrote %d times to the primary", writes(pr)-before)
	}
	if rep2.Verified != 3 {
		t.Fatalf("second join verified %d, want 3", rep2.Verified)
	}
}

func TestJoinTwoPalacesEitherOrder(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"ab", "ba"} {
		t.Run(order, func(t *testing.T) {
			pr := newPrimary(t)
			ps := map[byte]*palace{'a': newPalace(t), 'b': newPalace(t)}
			for tag, p := range ps {
				fill(t, p, string(tag))
				p.policy(t, localWorkspace)
				p.save(t)
			}
			for i := range order {
				if rep := run(t, config(t, ps[order[i]], pr), Options{Verify: All}); !rep.OK() {
					t.Fatalf("join %c: %+v", order[i], rep)
				}
			}
			st := exactlyOnce(t, pr)
			// 2x5 own notes + shared + 2 chunked; 2 own + 2 shared diaries.
			if len(st.Drawers) != 13+4 || len(st.Triples) != 2+2+2 {
				t.Fatalf("primary holds %d drawers and %d facts, want 17 and 6", len(st.Drawers), len(st.Triples))
			}
		})
	}
}

// Two containers on one host: one palace, two joins at once. One that
// starts while the other runs is refused (attack30 f10); between them
// they send each record once, and say so: before, both counted what the
// one sent.
func TestJoinConcurrentOnOnePalace(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	for i := range 60 {
		p.do(t, "diary_write", map[string]any{"agent_name": "pi", "entry": fmt.Sprintf("pi diary %d", i)})
		p.do(t, "kg_add", map[string]any{"subject": "s", "predicate": "p", "object": fmt.Sprint(i), "valid_from": "2025-01-01", "valid_to": "2025-02-01"})
	}
	p.policy(t, localWorkspace)
	p.save(t)
	cfg := config(t, p, pr)
	var wg sync.WaitGroup
	reps, errs := make([]Report, 2), make([]error, 2)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = Run(context.Background(), cfg, Options{Verify: 5, Seed: uint64(i)})
		}()
	}
	wg.Wait()
	sent := 0
	for i, r := range reps {
		var ue *UsageError
		switch {
		case errors.As(errs[i], &ue) && strings.Contains(ue.Error(), "another join"):
			continue
		case errs[i] != nil || !r.OK():
			t.Fatalf("join %d: %v %+v", i, errs[i], r)
		}
		sent += r.Sent[Drawers] + r.Sent[Diaries] + r.Sent[Facts]
	}
	st := exactlyOnce(t, pr)
	if len(st.Drawers) != 10+60 || len(st.Triples) != 4+60 {
		t.Fatalf("primary holds %d drawers and %d facts, want 70 and 64", len(st.Drawers), len(st.Triples))
	}
	if sent != 70+64 {
		t.Fatalf("the joins say they sent %d records between them; the primary got %d", sent, 70+64)
	}
}

func TestJoinOriginDeviceStampsDrawersOnly(t *testing.T) {
	t.Parallel()
	for _, device := range []string{"7f3a9c2e1b04", ""} {
		t.Run("device="+device, func(t *testing.T) {
			p, pr := newPalace(t), newPrimary(t)
			fill(t, p, "a")
			p.save(t)
			cfg := config(t, p, pr)
			cfg.Device = device
			if rep := run(t, cfg, Options{}); !rep.OK() {
				t.Fatalf("%+v", rep)
			}
			for _, d := range pr.pl.Dump().Drawers {
				switch {
				case d.Diary && strings.Contains(d.AddedBy, "/"):
					t.Errorf("diary %s stamped %q", d.ID, d.AddedBy)
				case !d.Diary && device != "" && d.AddedBy != "opencode/lab/"+device:
					t.Errorf("drawer %s added_by %q, want opencode/lab/%s", d.ID, d.AddedBy, device)
				case !d.Diary && device == "" && strings.Contains(d.AddedBy, "/"):
					t.Errorf("drawer %s stamped %q without --origin-device", d.ID, d.AddedBy)
				case !d.Diary && device == "" && d.Content == "shared note" && d.AddedBy != "pi":
					t.Errorf("drawer's own added_by not kept: %q", d.AddedBy)
				}
			}
		})
	}
}

// A dry run whose token the primary refuses fails its report with
// doctor's finding and fix, as the real run does, before and after a join (it exited 0 with a
// clean table: "Look first" said nothing of a token that would fail).
func TestJoinDryRunFailsOnARefusedToken(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	wrong := config(t, p, pr)
	wrong.Token = func() string { return "dbx_wrongwrongwrongwrongwrongwrong" }
	for _, when := range []string{"never joined", "joined already"} {
		if when == "joined already" {
			if rep := run(t, config(t, p, pr), Options{}); !rep.OK() {
				t.Fatalf("the join: %+v", rep.Failed)
			}
		}
		rep := run(t, wrong, Options{DryRun: true})
		if rep.OK() || len(rep.Failed) != 1 || rep.Failed[0].Record != "token" || !strings.Contains(rep.Failed[0].Error, "answered 401") || !strings.Contains(rep.Failed[0].Error, "doctor's primary-auth") || !strings.Contains(rep.Failed[0].Error, "Fix: ") {
			t.Errorf("%s: a dry run with a refused token reports %+v", when, rep.Failed)
		}
		if len(rep.Failed) > 0 && strings.Contains(rep.Failed[0].Error, "queued") {
			t.Errorf("%s: a dry run queues nothing: %s", when, rep.Failed[0].Error)
		}
	}
}

func TestJoinDryRunSendsNothing(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	cfg := config(t, p, pr)
	cfg.Token = nil // a dry run reads the palace without one, and says the real run would refuse to start (it exited 0 with a clean table: attack36 N2)
	rep := run(t, cfg, Options{DryRun: true})
	if rep.OK() || len(rep.Failed) != 1 || rep.Failed[0].Record != "token" || !strings.Contains(rep.Failed[0].Error, "MEMPALACE_REMOTE_TOKEN is not set") || !strings.Contains(rep.Failed[0].Error, "Fix: set MEMPALACE_REMOTE_TOKEN") {
		t.Errorf("a dry run without a token reports %+v", rep.Failed)
	}
	if !rep.DryRun || rep.Manifest[Drawers] != 7 || rep.Manifest[Diaries] != 3 || rep.Manifest["facts_open"] != 2 || rep.Manifest["facts_closed"] != 2 || rep.Pending[Drawers] != 7 {
		t.Fatalf("manifest: %+v", rep)
	}
	if writes(pr) != 0 || len(pr.pl.Dump().Drawers) != 0 {
		t.Fatal("a dry run wrote to the primary")
	}
	if _, err := os.Stat(filepath.Join(p.dir, "edge", OutboxFile(rep.Target))); err == nil {
		t.Fatal("a dry run created the join outbox")
	}
	if _, err := os.Stat(checkpointPath(p.dir)); err == nil {
		t.Fatal("a dry run wrote bootstrap.json")
	}
	// policy.json can keep the knowledge graph local.
	p.policy(t, `{"version": 1, "wings": {"workspace": {"replicate": "local"}}, "kg": {"replicate": "local"}}`)
	rep = run(t, config(t, p, pr), Options{})
	if !rep.OK() || !rep.Excluded.KnowledgeGraph || rep.Sent[Facts] != 0 || len(pr.pl.Dump().Triples) != 0 || rep.Sent[Drawers] != 7 {
		t.Fatalf("a local knowledge graph: %+v", rep)
	}
}

func TestJoinUsageErrors(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	p.save(t)
	for name, mod := range map[string]func(*Config){
		"no url":          func(c *Config) { c.URL = "" },
		"no token":        func(c *Config) { c.Token = func() string { return "" } },
		"no local server": func(c *Config) { c.Child = []string{filepath.Join(t.TempDir(), "mempalace-mcp")} },
	} {
		cfg := config(t, p, pr)
		mod(&cfg)
		_, err := Run(context.Background(), cfg, Options{})
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%s: err %v, want a usage error", name, err)
		}
	}
}

// Verification compares content on both sides and names what differs;
// TestCompareFinalChunkArithmetic covers truncation.
func TestJoinVerifyByContent(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	cfg := config(t, p, pr)
	if rep := run(t, cfg, Options{}); !rep.OK() {
		t.Fatalf("%+v", rep)
	}
	big := long("a chunked", 2100)
	var bigID, noteID string
	for _, d := range pr.pl.Dump().Drawers {
		switch d.Content {
		case big:
			bigID = d.ID
		case "a note 1":
			noteID = d.ID
		}
	}
	call(t, pr.pl, "mempalace_update_drawer", map[string]any{"drawer_id": bigID, "content": big[:1650]})
	call(t, pr.pl, "mempalace_update_drawer", map[string]any{"drawer_id": noteID, "content": "A note 1, edited on the primary"})
	rep := run(t, cfg, Options{Verify: All})
	if rep.OK() || len(rep.Mismatches) != 2 {
		t.Fatalf("want two mismatches: %+v", rep.Mismatches)
	}
	verdicts := map[string]string{}
	for _, m := range rep.Mismatches {
		verdicts[m.PrimaryID] = m.Verdict
	}
	// A shorter revision whose chunks add up is an edit, not loss (§9.3):
	// the double re-chunks on update as MemPalace does.
	if verdicts[bigID] != "edited" || verdicts[noteID] != "edited" {
		t.Fatalf("verdicts %v", verdicts)
	}
}

func TestCompareFinalChunkArithmetic(t *testing.T) {
	t.Parallel()
	c := long("x", 2000)
	side := func(content string, chunks int) map[string]any {
		return map[string]any{"content": content, "chunks": float64(chunks)}
	}
	tgt := verifyTarget{rec: Record{Kind: Drawers, LocalID: "d"}, primaryID: "d"}
	cases := []struct {
		local, primary map[string]any
		verdict        string
	}{
		{side(c, 3), side(c, 3), ""},
		{side(c, 3), side(c[:1600], 3), "truncated on the primary"}, // a chunk set left partial: 3 promised, 2 there
		{side(c[:900], 3), side(c, 3), "truncated locally"},
		{side(c, 3), side(c[:1600], 2), "edited"}, // a shorter revision, complete in its 2 chunks
		{side(c, 3), side("y"+c[1:1200], 2), "edited"},
		{side(c, 3), side("y"+c[1:1200], 3), "damaged"}, // 3 chunks cannot hold 1200 characters
	}
	for i, tc := range cases {
		m, ok := compare(tgt, tc.local, tc.primary)
		if ok != (tc.verdict == "") || m.Verdict != tc.verdict {
			t.Errorf("case %d: %v %q, want %q", i, ok, m.Verdict, tc.verdict)
		}
	}
}

// writeKG writes a MemPalace knowledge_graph.sqlite3 (entities by id,
// triples naming them) holding the palace's facts.
func writeKG(t testing.TB, file string, pl *fakepalace.Palace) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE entities (id TEXT PRIMARY KEY, name TEXT NOT NULL, type TEXT DEFAULT 'unknown', properties TEXT DEFAULT '{}', created_at TEXT);
		CREATE TABLE triples (id TEXT PRIMARY KEY, subject TEXT NOT NULL, predicate TEXT NOT NULL, object TEXT NOT NULL, valid_from TEXT, valid_to TEXT, confidence REAL DEFAULT 1.0, source_closet TEXT, source_file TEXT, extracted_at TEXT)`); err != nil {
		t.Fatal(err)
	}
	eid := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), " ", "_") }
	tx, _ := db.Begin()
	for _, tr := range pl.Dump().Triples {
		tx.Exec(`INSERT OR IGNORE INTO entities(id, name) VALUES(?, ?), (?, ?)`, eid(tr.Subject), tr.Subject, eid(tr.Object), tr.Object)
		if _, err := tx.Exec(`INSERT INTO triples(id, subject, predicate, object, valid_from, valid_to) VALUES(?,?,?,?,?,?)`, tr.ID, eid(tr.Subject), tr.Predicate, eid(tr.Object), tr.ValidFrom, tr.ValidTo); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// kg_timeline stops at 100 facts (no offset before 3.10): the rest come
// from the server's own knowledge_graph.sqlite3, read-only.
func TestJoinFactsBeyondTimelineCap(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	for i := range 150 {
		args := map[string]any{"subject": "Service " + fmt.Sprint(i%7), "predicate": "runs", "object": fmt.Sprintf("v%d", i)}
		if i%3 == 0 {
			args["valid_from"], args["valid_to"] = "2024-01-01", "2024-12-31"
		}
		p.do(t, "kg_add", args)
	}
	p.save(t)
	cfg := config(t, p, pr)
	cfg.Child = append(cfg.Child, "--release", "3.9.0") // a local server whose kg_timeline cannot page

	rep := run(t, cfg, Options{DryRun: true})
	if rep.Manifest[Facts] != 0 || len(rep.Failed) != 1 || !strings.Contains(rep.Failed[0].Error, "knowledge_graph.sqlite3") {
		t.Fatalf("without the sqlite file the facts must fail by name: %+v", rep)
	}
	kg := filepath.Join(p.dir, "knowledge_graph.sqlite3")
	writeKG(t, kg, p.pl)
	rep = run(t, cfg, Options{})
	if !rep.OK() || rep.Sent[Facts] != 150 || !strings.Contains(rep.FactsSource, kg) {
		t.Fatalf("%+v", rep)
	}
	if n := len(exactlyOnce(t, pr).Triples); n != 150 {
		t.Fatalf("primary holds %d facts, want 150", n)
	}
	for _, side := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(kg + side); err == nil {
			t.Errorf("reading the knowledge graph created %s", kg+side)
		}
	}
}

// A primary that accepts nothing ends the join with everything queued and
// named; --resume sends exactly what was left, and only that.
func TestJoinPrimaryDownThenResume(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	cfg := config(t, p, pr)
	addr := pr.srv.Addr()
	pr.srv.Stop()
	rep := run(t, cfg, Options{Stall: 300 * time.Millisecond, Verify: All}) // the primary refuses at once: nothing to wait for
	if rep.OK() || rep.Sent[Drawers] != 0 {
		t.Fatalf("a join to a stopped primary reported success: %+v", rep)
	}
	joined := strings.Join(func() []string {
		var s []string
		for _, f := range rep.Failed {
			s = append(s, f.Error)
		}
		return s
	}(), "\n")
	if !strings.Contains(joined, "accepted nothing") || !strings.Contains(joined, "run devbox-config join again") {
		t.Fatalf("failures do not say what to do:\n%s", joined)
	}
	if !strings.Contains(joined, "run devbox-config doctor") {
		t.Errorf("the primary's connection failure does not point at doctor, which finds the cause (the primary, or the gateway's upstream):\n%s", joined)
	}
	cp, _ := readCheckpoint(p.dir)
	if cp[rep.Target].State != "in_progress" || cp[rep.Target].JoinedAt != nil {
		t.Fatalf("bootstrap.json after a failed join: %+v", cp[rep.Target])
	}
	if err := pr.srv.Start(addr); err != nil {
		t.Fatal(err)
	}
	rep = run(t, cfg, Options{Resume: true})
	if !rep.OK() || rep.Sent[Drawers] != 7 || rep.Sent[Diaries] != 3 || rep.Sent[Facts] != 4 {
		t.Fatalf("resume: %+v", rep)
	}
	if rep.Manifest[Drawers] != 7 {
		t.Fatalf("resume read %d drawers; it sends only what was queued", rep.Manifest[Drawers])
	}
	exactlyOnce(t, pr)
	cp, _ = readCheckpoint(p.dir)
	if cp[rep.Target].State != "complete" || cp[rep.Target].JoinedAt == nil {
		t.Fatalf("bootstrap.json after resume: %+v", cp[rep.Target])
	}
	if _, err := Run(context.Background(), config(t, newPalace(t), pr), Options{Resume: true}); err == nil {
		t.Fatal("--resume on a palace that never started a join must be a usage error")
	}
}

func TestProgressLines(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	p := &Progress{W: &b, Every: 300 * time.Millisecond}
	p.Phase("sending", 100)
	p.Set(1)
	if b.Len() != 0 {
		t.Fatalf("a log line before the interval: %q", b.String())
	}
	time.Sleep(350 * time.Millisecond)
	p.Set(50)
	p.Set(60)
	p.Done()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "/100 records") || !strings.Contains(lines[0], "ETA") || !strings.Contains(lines[len(lines)-1], "60/100") {
		t.Fatalf("log lines: %q", b.String())
	}
	b.Reset()
	p = &Progress{W: &b, Terminal: true}
	p.Phase("queuing", 10)
	time.Sleep(210 * time.Millisecond)
	p.Set(5)
	p.Done()
	if !strings.HasPrefix(b.String(), "\r\x1b[K") || strings.Count(b.String(), "\n") != 1 || !strings.Contains(b.String(), "5/10") {
		t.Fatalf("terminal line: %q", b.String())
	}
}

// Two different palaces joining one primary at the same moment: neither
// MemPalace nor the outbox can stop both from sending a diary entry or a
// closed fact they share (no server guard; the look-ups race). The join
// cannot prevent it, so it finds it: each run names the second copy as a
// mismatch instead of reporting success.
func TestJoinNamesACopyFromAConcurrentPalace(t *testing.T) {
	t.Parallel()
	pr := newPrimary(t)
	trace := &testbed.SyncBuffer{}
	fakepalace.SetTrace(pr.pl, trace)
	diaryGate, factGate := make(chan struct{}), make(chan struct{})
	pr.pl.SetHold("mempalace_diary_write", diaryGate)
	pr.pl.SetHold("mempalace_kg_add", factGate)
	var cfgs []Config
	for _, tag := range []string{"a", "b"} {
		p := newPalace(t)
		p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": tag + " own note"})
		p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "shared diary entry"})
		p.do(t, "kg_add", map[string]any{"subject": "Alice", "predicate": "lived_in", "object": "Oslo", "valid_from": "2020-01-01", "valid_to": "2023-06-30"})
		p.save(t)
		cfgs = append(cfgs, config(t, p, pr))
	}
	waitFor := func(tool string, n int) {
		deadline := time.Now().Add(20 * time.Second)
		for strings.Count(trace.String(), `"name":"`+tool+`"`) < n {
			if time.Now().After(deadline) {
				t.Fatalf("never saw %d %s calls:\n%s", n, tool, trace.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	reps := make([]Report, 2)
	var wg sync.WaitGroup
	for i := range cfgs {
		wg.Add(1)
		go func() { defer wg.Done(); reps[i] = run(t, cfgs[i], Options{}) }()
	}
	waitFor("mempalace_diary_write", 2) // both looked, found nothing, and wrote
	close(diaryGate)
	waitFor("mempalace_kg_add", 2)
	// Both facts are on the primary before either join verifies: a join
	// released first could otherwise read the primary before the other's
	// fact landed and find one copy (on a loaded machine).
	verifyGate := make(chan struct{})
	pr.pl.SetHold("mempalace_kg_query", verifyGate)
	close(factGate)
	for deadline := time.Now().Add(20 * time.Second); pr.pl.Calls("mempalace_kg_add") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the two held kg_add calls were never applied")
		}
	}
	close(verifyGate)
	wg.Wait()
	for i, r := range reps {
		verdicts := map[string]int{}
		for _, m := range r.Mismatches {
			if m.Verdict == "duplicate on the primary" {
				verdicts[m.Kind]++
			}
		}
		if r.OK() || verdicts[Diaries] != 1 || verdicts[Facts] != 1 {
			t.Errorf("join %d did not name both copies: %+v", i, r.Mismatches)
		}
	}
}

// pagingKG answers kg_timeline as 3.10+ does: limit/offset pages of a
// graph larger than 100.
type pagingKG struct{ facts []fact }

func (k pagingKG) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	switch tool {
	case "mempalace_kg_stats":
		return map[string]any{"triples": float64(len(k.facts))}, nil
	case "mempalace_kg_timeline":
		off, _ := args["offset"].(int)
		lim := 100
		rows := []any{}
		for _, f := range k.facts[min(off, len(k.facts)):min(off+lim, len(k.facts))] {
			rows = append(rows, map[string]any{"subject": f.Subject, "predicate": f.Predicate, "object": f.Object, "valid_from": f.ValidFrom, "valid_to": f.ValidTo})
		}
		return map[string]any{"timeline": rows, "count": float64(len(rows))}, nil
	}
	return nil, fmt.Errorf("unexpected %s", tool)
}

func TestFactsPagedWhereTheServerCan(t *testing.T) {
	t.Parallel()
	k := pagingKG{}
	for i := range 250 {
		k.facts = append(k.facts, fact{Subject: "s", Predicate: "p", Object: fmt.Sprint(i)})
	}
	got, source, err := kgReader{}.read(context.Background(), k)
	if err != nil || len(got) != 250 || !strings.Contains(source, "paged") {
		t.Fatalf("%d facts, %q, %v", len(got), source, err)
	}
	got, _, err = kgReader{}.read(context.Background(), pagingKG{facts: k.facts[:100]})
	if err != nil || len(got) != 100 {
		t.Fatalf("exactly 100 facts: %d %v", len(got), err)
	}
}
