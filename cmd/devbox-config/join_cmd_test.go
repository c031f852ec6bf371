package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/join"
	"github.com/joakimp/devbox-config/testbed"
)

const joinToken = "tok-JOIN-cmd-SECRET"

func fakeCall(t testing.TB, pl *fakepalace.Palace, tool string, args map[string]any) {
	t.Helper()
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args}})
	out, err := pl.Handle(msg)
	if err != nil || !bytes.Contains(out, []byte(`"result"`)) || bytes.Contains(out, []byte(`success\": false`)) {
		t.Fatalf("%s: %s %v", tool, out, err)
	}
}

// joinFixture is a local palace for the built double, a primary over
// HTTP, and the environment a container would give devbox-config join.
type joinFixture struct {
	palace  string
	primary *fakepalace.Palace
	srv     *fakepalace.HTTPServer
	bin     string
	env     []string
}

func newJoinFixture(t *testing.T, fill func(pl *fakepalace.Palace)) *joinFixture {
	t.Helper()
	testbed.Integration(t, "builds and runs the devbox-config binary")
	f := &joinFixture{palace: filepath.Join(t.TempDir(), "palace")}
	local, _ := fakepalace.New(fakepalace.Options{})
	fill(local)
	os.MkdirAll(f.palace, 0o700)
	b, _ := json.Marshal(local.Dump())
	os.WriteFile(filepath.Join(f.palace, "fakepalace.json"), b, 0o600)
	f.primary, f.srv = testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: joinToken})
	f.bin = testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	child := testbed.Build(t, "./cmd/fakepalace", "mempalace-mcp")
	f.env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "MEMPALACE_PALACE_PATH=" + f.palace, "MEMPALACE_EDGE_CHILD=" + child,
		"MEMPALACE_REMOTE_URL=" + f.srv.URL(), "MEMPALACE_REMOTE_TOKEN=" + joinToken, "MEMPALACE_AGENT_NAME=pi", "MEMPALACE_ORIGIN_LABEL=lab"}
	return f
}

func (f *joinFixture) command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, f.bin, append([]string{"join"}, args...)...)
	cmd.Env = append(append([]string{}, f.env...), env...)
	return cmd
}

func (f *joinFixture) run(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := f.command(ctx, env, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(o.String()+e.String(), joinToken) {
		t.Fatalf("join %v printed the token", args)
	}
	return code, o.String(), e.String()
}

func fillBig(pl *fakepalace.Palace, t *testing.T) {
	for i := range 200 {
		content := fmt.Sprintf("note %d", i)
		if i%25 == 0 {
			content = strings.Repeat(fmt.Sprintf("chunked note %d. ", i), 120) // > 800 characters
		}
		fakeCall(t, pl, "add_drawer", map[string]any{"wing": "project", "room": fmt.Sprintf("r%d", i%4), "content": content})
	}
	for i := range 40 {
		fakeCall(t, pl, "diary_write", map[string]any{"agent_name": "pi", "entry": fmt.Sprintf("diary entry %d", i)})
	}
	for i := range 40 {
		fakeCall(t, pl, "kg_add", map[string]any{"subject": "svc", "predicate": "ran", "object": fmt.Sprint(i), "valid_from": "2025-01-01", "valid_to": "2025-06-01"})
	}
	for i := range 20 {
		fakeCall(t, pl, "kg_add", map[string]any{"subject": "team", "predicate": "owns", "object": fmt.Sprint(i)})
	}
	fakeCall(t, pl, "add_drawer", map[string]any{"wing": "workspace", "room": "mined", "content": "mined, local"})
}

// checkOnce asserts the primary holds each record once and nothing local.
func checkOnce(t *testing.T, pl *fakepalace.Palace, drawers, triples int) {
	t.Helper()
	st := pl.Dump()
	seen := map[string]int{}
	for _, d := range st.Drawers {
		if d.Wing == "workspace" {
			t.Errorf("local-policy wing reached the primary: %s", d.ID)
		}
		seen[d.Wing+d.Room+d.Content]++
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%d copies of %.50q", n, k)
		}
	}
	facts := map[string]int{}
	for _, tr := range st.Triples {
		to := ""
		if tr.ValidTo != nil {
			to = *tr.ValidTo
		}
		facts[tr.Subject+tr.Predicate+tr.Object+to]++
	}
	for k, n := range facts {
		if n > 1 {
			t.Errorf("%d copies of the fact %s", n, k)
		}
	}
	if len(st.Drawers) != drawers || len(st.Triples) != triples {
		t.Fatalf("primary holds %d drawers and %d facts, want %d and %d", len(st.Drawers), len(st.Triples), drawers, triples)
	}
}

// A join killed with SIGKILL at random points always completes on the next
// run, with every record on the primary exactly once. A join that ends by
// itself (the kills before it sent the rest) is checked, and the next
// round starts over with a fresh palace and primary, until 20 kills landed.
func TestJoinSurvivesSIGKILL(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261201, 1))
	killed := 0
	for round := 0; killed < 20; round++ {
		if round == 6 {
			t.Fatalf("only %d kills landed mid-join in 6 rounds", killed)
		}
		killed += killRoundOfJoin(t, rng, 20-killed)
	}
}

// killRoundOfJoin kills joins of a fresh palace at random points (at most
// kills of them), then checks the join that ends by itself: every record
// once, verified, and a join after it sends nothing. It returns the kills.
func killRoundOfJoin(t *testing.T, rng *rand.Rand, kills int) int {
	t.Helper()
	f := newJoinFixture(t, func(pl *fakepalace.Palace) { fillBig(pl, t) })
	os.MkdirAll(filepath.Join(f.palace, "edge"), 0o700)
	os.WriteFile(filepath.Join(f.palace, "edge", "policy.json"), []byte(`{"version":1,"wings":{"workspace":{"replicate":"local"}}}`), 0o600)
	for _, tool := range []string{"mempalace_add_drawer", "mempalace_diary_write", "mempalace_kg_add", "mempalace_kg_query", "mempalace_list_drawers"} {
		f.primary.SetLatency(tool, 2*time.Millisecond) // a join of ~1 s: kills land in every phase
	}
	killed := 0
	for i := 0; killed < kills; i++ {
		cmd := f.command(context.Background(), nil, "--json", "--verify", "0")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		ended := false
		select {
		case <-time.After(time.Duration(rng.IntN(900)) * time.Millisecond):
			cmd.Process.Kill()
			<-done
			killed++
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d ended by itself with %v:\n%s", i, err, out.String())
			}
			ended = true
		}
		if strings.Contains(out.String(), joinToken) {
			t.Fatal("join printed the token")
		}
		checkOnceSoFar(t, f.primary)
		if ended {
			break
		}
	}
	code, stdout, stderr := f.run(t, nil, "--json", "--verify", "all")
	if code != 0 {
		t.Fatalf("the run after the kills: exit %d\n%s%s", code, stdout, stderr)
	}
	var rep struct {
		Failed   []any `json:"failed"`
		Verified int   `json:"verified"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Failed) != 0 || rep.Verified != 240 {
		t.Fatalf("final report: %v %s", err, stdout)
	}
	checkOnce(t, f.primary, 240, 60)
	code, stdout, _ = f.run(t, nil, "--json", "--verify", "0")
	if code != 0 || !strings.Contains(stdout, `"drawers": 0`) {
		t.Fatalf("a join after completion: exit %d %s", code, stdout)
	}
	return killed
}

// checkOnceSoFar: no duplicate at any point between kills.
func checkOnceSoFar(t *testing.T, pl *fakepalace.Palace) {
	t.Helper()
	seen := map[string]bool{}
	for _, d := range pl.Dump().Drawers {
		k := d.Wing + d.Room + d.Content
		if seen[k] {
			t.Fatalf("duplicate on the primary after a kill: %.60q", k)
		}
		seen[k] = true
	}
	facts := map[string]bool{}
	for _, tr := range pl.Dump().Triples {
		k := fmt.Sprint(tr.Subject, tr.Predicate, tr.Object, tr.ValidTo != nil)
		if facts[k] {
			t.Fatalf("duplicate fact after a kill: %s", k)
		}
		facts[k] = true
	}
}

func TestJoinCommandOutputAndExitCodes(t *testing.T) {
	f := newJoinFixture(t, func(pl *fakepalace.Palace) {
		fakeCall(t, pl, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "hello"})
		fakeCall(t, pl, "diary_write", map[string]any{"agent_name": "pi", "entry": "a day"})
		fakeCall(t, pl, "kg_add", map[string]any{"subject": "a", "predicate": "b", "object": "c"})
	})
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no url", []string{"MEMPALACE_REMOTE_URL="}, nil, "MEMPALACE_REMOTE_URL"},
		{"no token", []string{"MEMPALACE_REMOTE_TOKEN="}, nil, "MEMPALACE_REMOTE_TOKEN"},
		{"no local server", []string{"MEMPALACE_EDGE_CHILD=/nonexistent/mempalace-mcp"}, nil, "no local palace server"},
		{"bad verify", nil, []string{"--verify", "some"}, "--verify"},
		{"bad device", nil, []string{"--origin-device", "a/b"}, "--origin-device"},
		{"device with a space", nil, []string{"--origin-device", "a b"}, `--origin-device "a b": must be an opaque id without '/', white space or an invisible character`},
		// An invisible character is named escaped: one that shows as a blank is seen.
		{"device with a blank", nil, []string{"--origin-device", "a\u2800b"}, `--origin-device "a\u2800b": must be an opaque id`},
		{"bad glob", nil, []string{"--wing", "[x"}, "--wing"},
	} {
		code, out, errOut := f.run(t, tc.env, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, want 2 naming %s\n%s%s", tc.name, code, tc.want, out, errOut)
		}
	}
	if writesOn(f.primary) != 0 {
		t.Fatal("a usage error wrote to the primary")
	}

	code, out, errOut := f.run(t, nil, "--dry-run")
	if code != 0 || !strings.Contains(out, "dry run, nothing is sent") || !strings.Contains(out, "diaries") || writesOn(f.primary) != 0 {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = f.run(t, nil, "--json", "--origin-device", "7f3a9c2e1b04")
	if code != 0 {
		t.Fatalf("join: exit %d\n%s%s", code, out, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var rep map[string]any
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatalf("--json printed more than one object:\n%s", out)
	}
	for _, k := range []string{"sent", "skipped", "excluded", "verified", "mismatches", "failed"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("--json lacks %q: %s", k, out)
		}
	}
	if rep["sent"].(map[string]any)["diaries"] != 1.0 || rep["verified"] != 2.0 {
		t.Fatalf("report: %s", out)
	}
	for _, d := range f.primary.Dump().Drawers {
		if !d.Diary && d.AddedBy != "pi/lab/7f3a9c2e1b04" {
			t.Errorf("drawer added_by %q", d.AddedBy)
		}
	}
	testbed.NoFileContains(t, f.palace, joinToken)

	// A sample names its seed (it reproduces the sample); all has none.
	if code, out, _ = f.run(t, nil, "--verify", "2", "--seed", "7"); code != 0 || !strings.Contains(out, "verified  2 of 2 sampled by content (seed 7)\n") {
		t.Errorf("a sampled verify: exit %d\n%s", code, out)
	}
	if code, out, _ = f.run(t, nil, "--verify", "all"); code != 0 || !strings.Contains(out, "verified  2 of 2 by content\n") {
		t.Errorf("verify all: exit %d\n%s", code, out)
	}

	// An edit on the primary is a mismatch: exit 1, named.
	for _, d := range f.primary.Dump().Drawers {
		if d.Content == "hello" {
			fakeCall(t, f.primary, "update_drawer", map[string]any{"drawer_id": d.ID, "content": "Hello, edited"})
		}
	}
	code, out, _ = f.run(t, nil, "--verify", "all")
	if code != 1 || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, "edited") || !strings.Contains(out, "sent      drawers 0, diaries 0, facts 0") {
		t.Fatalf("a mismatch: exit %d\n%s", code, out)
	}
}

func writesOn(pl *fakepalace.Palace) int {
	return pl.Calls("mempalace_add_drawer") + pl.Calls("mempalace_diary_write") + pl.Calls("mempalace_kg_add")
}

// Ctrl-C (SIGTERM) mid-join: exit 1, the report names what stays queued,
// and the next run sends exactly the rest.
func TestJoinInterruptedThenRerun(t *testing.T) {
	f := newJoinFixture(t, func(pl *fakepalace.Palace) { fillBig(pl, t) })
	os.MkdirAll(filepath.Join(f.palace, "edge"), 0o700)
	os.WriteFile(filepath.Join(f.palace, "edge", "policy.json"), []byte(`{"version":1,"wings":{"workspace":{"replicate":"local"}}}`), 0o600)
	f.primary.SetLatency("mempalace_add_drawer", 5*time.Millisecond)
	cmd := f.command(context.Background(), nil, "--json")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(f.primary.Dump().Drawers) < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("the join sent nothing:\n%s", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("interrupted join: %v\n%s%s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), `"record": "not tried"`) || !strings.Contains(out.String(), "the join was stopped") || !strings.Contains(out.String(), "run devbox-config join again") {
		t.Fatalf("the report does not name what stays queued:\n%s", out.String())
	}
	code, stdout, stderr := f.run(t, nil, "--json", "--verify", "all")
	if code != 0 {
		t.Fatalf("rerun: exit %d\n%s%s", code, stdout, stderr)
	}
	checkOnce(t, f.primary, 240, 60)
}

// Only --origin-device stamps: MEMPALACE_ORIGIN_DEVICE in the environment
// (the edge's stamp for new writes) does not attribute a bulk import.
func TestJoinStampsOnlyWithTheFlag(t *testing.T) {
	f := newJoinFixture(t, func(pl *fakepalace.Palace) {
		fakeCall(t, pl, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "hello"})
	})
	if code, out, errOut := f.run(t, []string{"MEMPALACE_ORIGIN_DEVICE=env-device"}); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, d := range f.primary.Dump().Drawers {
		if d.AddedBy != "mcp" {
			t.Fatalf("stamped without --origin-device: %q", d.AddedBy)
		}
	}
}

// join --env-file reads the MEMPALACE_* variables from the device's .env,
// as doctor --env-file does, the local server's included (attack13: a
// first-day operator had to export the .env by hand).
func TestJoinEnvFile(t *testing.T) {
	f := newJoinFixture(t, func(pl *fakepalace.Palace) {
		fakeCall(t, pl, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "from the env file"})
	})
	var file, blank []string
	for _, kv := range f.env {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "MEMPALACE_") {
			file, blank = append(file, kv), append(blank, name+"=")
		}
	}
	env := filepath.Join(t.TempDir(), ".env")
	os.WriteFile(env, []byte(strings.Join(file, "\n")+"\n"), 0o600)
	code, out, errOut := f.run(t, blank, "--env-file", env)
	if code != 0 || len(f.primary.Dump().Drawers) != 1 {
		t.Fatalf("join --env-file: exit %d, %d drawers on the primary\n%s%s", code, len(f.primary.Dump().Drawers), out, errOut)
	}
	if code, _, errOut := f.run(t, blank, "--env-file", env+".missing"); code != 2 || !strings.Contains(errOut, ".env.missing") {
		t.Errorf("join --env-file of no file: exit %d, %s", code, errOut)
	}
}

// The records a gateway did not file again because an admin deleted them
// on the primary get a line of their own, with the fix.
func TestJoinPrintsDeletedOnThePrimary(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	r := join.Report{Target: "https://palace.example/mcp", DeletedOnPrimary: map[string]int{join.Drawers: 2, join.Diaries: 1}}
	printJoin(&b, r, false)
	if !strings.Contains(b.String(), "deleted   drawers 2, diaries 1, facts 0 (deleted on the primary since") || !strings.Contains(b.String(), "gateway trash restore N") {
		t.Errorf("join's output:\n%s", b.String())
	}
	b.Reset()
	r.DeletedOnPrimary = map[string]int{}
	if printJoin(&b, r, false); strings.Contains(b.String(), "deleted ") {
		t.Errorf("a join with none deleted on the primary prints:\n%s", b.String())
	}
}

// attack120 F1: facts another value replaced on the primary are counted
// on a line of their own, not as already on the primary.
func TestJoinPrintsReplacedOnThePrimary(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printJoin(&b, join.Report{Target: "https://palace.example/mcp", ReplacedOnPrimary: 2}, false)
	if !strings.Contains(b.String(), "replaced  facts 2 (another value is current on the primary: not sent, see the note)") || !strings.Contains(b.String(), "skipped   drawers 0, diaries 0, facts 0 (already on the primary)") {
		t.Errorf("join's output:\n%s", b.String())
	}
}

// A mismatch whose drawer the primary holds under another id (a mined
// drawer: its id there is its content's) names both, so the operator can
// look it up on the primary (attack21: only the local id was named).
func TestJoinMismatchNamesThePrimarysID(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printJoin(&b, join.Report{Mismatches: []join.Mismatch{
		{Kind: join.Drawers, LocalID: "drawer_team_b_general_144dbd", PrimaryID: "drawer_team_b_general_00923d", Verdict: "edited", Detail: "two complete revisions"},
		{Kind: join.Drawers, LocalID: "drawer_same", PrimaryID: "drawer_same", Verdict: "missing", Detail: "not on the primary"},
	}}, true)
	out := b.String()
	if !strings.Contains(out, "MISMATCH  drawers drawer_team_b_general_144dbd (on the primary drawer_team_b_general_00923d): edited") {
		t.Errorf("the primary's id is not named:\n%s", out)
	}
	if !strings.Contains(out, "MISMATCH  drawers drawer_same: missing") {
		t.Errorf("an id the same on both sides is named twice:\n%s", out)
	}
}

// attack30 f7: a palace filled with another embedder than the one
// configured (its sidecar names openai-compat; nothing here configures
// it: minilm) is refused once, before anything is read or sent, with
// doctor's embedder-sidecar fix, not one bare "Embedder identity
// mismatch" per record.
func TestJoinRefusesAPalaceOfAnotherEmbedder(t *testing.T) {
	f := newJoinFixture(t, func(pl *fakepalace.Palace) {
		fakeCall(t, pl, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "hello"})
	})
	os.WriteFile(filepath.Join(f.palace, "mempalace_embedder.json"), []byte(`{"mempalace_drawers": {"model_name": "openai-compat", "dimension": 384}}`), 0o600)
	code, stdout, stderr := f.run(t, nil)
	if code != 2 || !strings.Contains(stderr, "MEMPALACE_EMBEDDING_MODEL=openai-compat") || !strings.Contains(stderr, "embedder-sidecar") || len(f.primary.Dump().Drawers) != 0 {
		t.Fatalf("join of a palace of another embedder: exit %d, %d drawers sent\n%s%s", code, len(f.primary.Dump().Drawers), stdout, stderr)
	}
}

// attack30 f1: after `join --env-file`, the commands its report prints to
// act on a refused record work as printed, from a shell whose environment
// holds no MEMPALACE_* variable.
func TestJoinEnvFileHintsWorkAsPrinted(t *testing.T) {
	f := newJoinFixture(t, func(pl *fakepalace.Palace) {
		fakeCall(t, pl, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "refused"})
	})
	f.srv.FailTool("mempalace_add_drawer", 100, fakepalace.FailInternal)
	var file, blank []string
	for _, kv := range f.env {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "MEMPALACE_") {
			file, blank = append(file, kv), append(blank, name+"=")
		}
	}
	env := filepath.Join(t.TempDir(), "my device.env")
	os.WriteFile(env, []byte(strings.Join(file, "\n")+"\n"), 0o600)
	code, out, errOut := f.run(t, blank, "--env-file", env)
	hint := regexp.MustCompile("`([^`]*edge outbox list --join[^`]*)`").FindStringSubmatch(out)
	if code != 1 || hint == nil {
		t.Fatalf("join --env-file with a refused record: exit %d, no list command\n%s%s", code, out, errOut)
	}
	sh := exec.Command("sh", "-c", hint[1])
	sh.Env = []string{"HOME=" + t.TempDir(), "PATH=" + filepath.Dir(f.bin) + ":/usr/bin:/bin"}
	got, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "dead") {
		t.Fatalf("the printed %q: %v\n%s", hint[1], err, got)
	}
}
