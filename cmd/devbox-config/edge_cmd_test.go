package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// edge status / outbox list / retry / drop / flush, as an operator uses them.
func TestEdgeOperatorCommands(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	primary, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok-SECRET-ops"})
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", srv.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok-SECRET-ops")
	cli := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if got := run(args, &out, &errb); got != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, got, want, out.String(), errb.String())
		}
		if strings.Contains(out.String()+errb.String(), "tok-SECRET-ops") {
			t.Fatalf("%v printed the token", args)
		}
		return out.String() + errb.String()
	}
	if out := cli(0, "edge", "status"); !strings.Contains(out, "none yet") {
		t.Fatalf("status without an outbox: %s", out)
	}

	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// One source file: the second write orders after the first (a causal
	// key in common), so it waits while the first is dead.
	bad, _ := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"refused once","source_file":"notes.md","bogus":1}`), Wing: "w"})
	s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"waiting behind it","source_file":"notes.md"}`), Wing: "w"})
	f := &outbox.Flusher{S: s, P: refusing{&outbox.RPCError{Code: -31003, Message: "devbox-config gateway: dev may not call mempalace_add_drawer (write globs do not match the target wing)"}}, MaxRefusals: 1}
	f.Drain(ctx)
	s.Close()

	out := cli(0, "edge", "status")
	for _, want := range []string{"queued 1", "dead 1", "DEAD", bad.ID[:12], "may not call", "reachable", "embedder   no mismatch"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// The dead op holds back the write behind it until the operator acts
	// (docs/replication.md): status says so beside its way out.
	if !strings.Contains(out, "1 later op on the same objects waits behind it") {
		t.Errorf("status does not say the dead op holds back the one behind it:\n%s", out)
	}
	var st map[string]any
	json.Unmarshal([]byte(cli(0, "edge", "status", "--json")), &st)
	if st["queue"].(map[string]any)["by_state"].(map[string]any)["dead"] != 1.0 {
		t.Fatalf("status --json: %v", st)
	}
	if out := cli(0, "edge", "outbox", "list"); !strings.Contains(out, "dead") || !strings.Contains(out, "queued") || !strings.Contains(out, "refused by the primary: JSON-RPC error -31003") {
		t.Fatalf("list: %s", out)
	}
	// flush sends nothing: the dead op holds back the one behind it
	if out := cli(1, "edge", "flush"); !strings.Contains(out, "sent 0") {
		t.Fatalf("flush with a dead head: %s", out)
	}
	// retry queues it again; the operator then drops it
	if out := cli(0, "edge", "outbox", "retry", bad.ID[:12]); !strings.Contains(out, "queued") {
		t.Fatalf("retry: %s", out)
	}
	if out := cli(0, "edge", "outbox", "drop", bad.ID[:12]); !strings.Contains(out, "dropped") || strings.Contains(out, "done") {
		t.Fatalf("drop: %s", out)
	}
	if out := cli(0, "edge", "flush"); !strings.Contains(out, "sent 1; left: queued 0, inflight 0, dead 0") {
		t.Fatalf("flush: %s", out)
	}
	if len(primary.Dump().Drawers) != 1 {
		t.Fatal("flush did not deliver the write")
	}
	if out := cli(1, "edge", "outbox", "retry", "ffffffff"); !strings.Contains(out, "no op") {
		t.Fatalf("retry of an unknown op: %s", out)
	}
	if out := cli(0, "edge", "outbox", "list", "--all"); !strings.Contains(out, "dropped by the operator") {
		t.Fatalf("list --all: %s", out)
	}
}

// edge flush sends now: an op waiting out the backoff of an earlier
// failure is sent, and with nothing listening on the primary's port the
// output says the primary is unreachable, not "up".
func TestEdgeFlushSendsNowAndTellsTheTruth(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	primary, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok"})
	url := srv.URL()
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", url)
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"before the laptop closes"}`), Wing: "w"})
	// An earlier failure leaves the head waiting out a long backoff.
	(&outbox.Flusher{S: s, P: failing{}, BaseDelay: time.Hour, MaxDelay: time.Hour}).Drain(ctx)
	if ops, _ := s.List(ctx, 1); len(ops) != 1 || time.Until(ops[0].NextAttemptAt) < 10*time.Minute {
		t.Fatalf("setup: the op should wait out a backoff: %+v", ops)
	}
	s.Close()

	srv.Stop() // nothing listens on the primary's port now
	var out, errb bytes.Buffer
	if code := run([]string{"edge", "flush", "--timeout", "5s"}, &out, &errb); code != 1 {
		t.Fatalf("flush with the primary down: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "primary: unreachable") || strings.Contains(out.String(), "primary: up") || !strings.Contains(out.String(), "unreachable: not sent") {
		t.Errorf("flush with the primary down says:\n%s", out.String())
	}

	srv2 := primary.NewHTTP(fakepalace.HTTPOptions{Token: "tok"})
	if err := srv2.Start(strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")); err != nil {
		t.Fatal(err)
	}
	defer srv2.Stop()
	out.Reset()
	if code := run([]string{"edge", "flush", "--timeout", "10s"}, &out, &errb); code != 0 {
		t.Fatalf("flush with the primary back: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if primary.Dump().CountContent("before the laptop closes") != 1 || !strings.Contains(out.String(), "sent 1") {
		t.Errorf("flush did not send the op waiting out its backoff:\n%s", out.String())
	}
}

type failing struct{}

func (failing) Up() bool { return true }
func (failing) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	return nil, &outbox.RPCError{Code: -32000, Message: "database is locked"}
}

// On a fresh HOME where edge mode never ran, the operator commands answer
// "nothing queued" and exit 0 (they used to exit 1 with "no outbox at …"),
// and they create no file or directory to say so (R1).
func TestEdgeCommandsWithoutOutboxCreateNothing(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("MEMPALACE_PALACE_PATH", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("MEMPALACE_EDGE", "1")
	t.Setenv("MEMPALACE_REMOTE_URL", "http://127.0.0.1:1/mcp") // nothing listens
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok-SECRET-fresh")
	want := filepath.Join(home, ".config", "mempalace", "palace", "edge", outbox.FileName) // MemPalace 3.11's palace on a fresh HOME
	cli := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, want 0\n%s%s", args, code, out, errOut)
		}
		if strings.Contains(out+errOut, "tok-SECRET-fresh") {
			t.Fatalf("%v printed the token", args)
		}
		return out
	}
	if out := cli("edge", "outbox", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("outbox list --json: %q, want []", out)
	}
	if out := cli("edge", "outbox", "list"); !strings.Contains(out, "empty") || !strings.Contains(out, "edge mode never ran on this palace") {
		t.Errorf("outbox list: %q", out)
	}
	if out := cli("edge", "status"); !strings.Contains(out, "none yet at "+want) || !strings.Contains(out, "edge mode never ran") || !strings.Contains(out, "unreachable") {
		t.Errorf("status: %q", out)
	}
	var st struct {
		Outbox       string `json:"outbox"`
		OutboxExists *bool  `json:"outbox_exists"`
		Note         string `json:"note"`
		Queue        struct {
			ByState map[string]int `json:"by_state"`
		} `json:"queue"`
		Primary string `json:"primary"`
	}
	out := cli("edge", "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	if st.OutboxExists == nil || *st.OutboxExists || st.Outbox != want || !strings.Contains(st.Note, "no outbox") || st.Queue.ByState["queued"] != 0 || !strings.Contains(st.Primary, "unreachable") {
		t.Errorf("status --json: %+v\n%s", st, out)
	}
	entries, err := os.ReadDir(home)
	if err != nil || len(entries) != 0 {
		t.Fatalf("HOME after the commands: %v %v (want nothing created)", entries, err)
	}
}

// Issue 29, point 5: `edge status` asks the primary with the token, so a
// revoked token reads "refused the token", never "reachable"; and with the
// right token, "reachable, token accepted". Before, it asked only /healthz,
// which takes no token.
func TestEdgeStatusChecksTheToken(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "the-current-token"})
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", srv.URL())
	status := func() string {
		var out, errb bytes.Buffer
		if code := run([]string{"edge", "status"}, &out, &errb); code != 0 {
			t.Fatalf("status: exit %d\n%s%s", code, out.String(), errb.String())
		}
		return out.String()
	}
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "a-revoked-token")
	if out := status(); !strings.Contains(out, "refused the token") || strings.Contains(out, "reachable") {
		t.Errorf("status with a revoked token:\n%s", out)
	}
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "the-current-token")
	if out := status(); !strings.Contains(out, "reachable, token accepted") {
		t.Errorf("status with the right token:\n%s", out)
	}
}

// edgeOutbox points the edge commands at a palace in a new temporary
// directory and a primary nothing listens on, and opens the palace's
// outbox (the caller closes it).
func edgeOutbox(t *testing.T) *outbox.Store {
	t.Helper()
	palace := filepath.Join(t.TempDir(), "palace")
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", "http://127.0.0.1:1/mcp")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runOK runs `devbox-config ARGS`, wants exit 0, and returns stdout.
func runOK(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// Issue 29, point 5: one op-id form everywhere: tables print the 12-digit
// short form, --json the full id, and every command takes either.
func TestOpIDForms(t *testing.T) {
	s := edgeOutbox(t)
	op, _ := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Wing: "w"})
	s.Close()
	if out := runOK(t, "edge", "outbox", "list"); !strings.Contains(out, op.ID[:12]) || strings.Contains(out, op.ID[:13]) {
		t.Errorf("list prints the op as:\n%s", out)
	}
	if out := runOK(t, "edge", "outbox", "list", "--json"); !strings.Contains(out, `"op_id": "`+op.ID+`"`) {
		t.Errorf("list --json:\n%s", out)
	}
	for _, id := range []string{op.ID, op.ID[:12], strings.ToUpper(op.ID[:8])} {
		if out := runOK(t, "edge", "outbox", "retry", id); !strings.HasPrefix(out, op.ID[:12]+" ") {
			t.Errorf("retry %s: %s", id, out)
		}
	}
}

// A write at the local palace (or left there by a killed edge) is an
// intent in the outbox: status counts it and says what becomes of it, in
// text and --json, instead of showing nothing pending; and whether its
// edge is alive, from its lock (attack84 F1: it could not tell).
func TestEdgeStatusShowsIntents(t *testing.T) {
	s := edgeOutbox(t)
	op, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"at the local palace"}`), Wing: "w", Intent: true})
	if err != nil || op.State != outbox.Intent {
		t.Fatalf("enqueue an intent: %v, %v", op.State, err)
	}
	s.Close() // its edge is gone
	// Another edge, still at its local palace:
	alive, err := outbox.Open(s.Path(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer alive.Close()
	if _, err := alive.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"still at it"}`), Wing: "w", Intent: true}); err != nil {
		t.Fatal(err)
	}
	out := runOK(t, "edge", "status")
	for _, want := range []string{"intent 2", "INTENT", "1 of an edge alive", "1 of an edge stopped or killed", "edge flush"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var st struct {
		Queue struct {
			ByState map[string]int `json:"by_state"`
			Intents []outbox.Op    `json:"intents"`
		} `json:"queue"`
		IntentNote string `json:"intent_note"`
	}
	if err := json.Unmarshal([]byte(runOK(t, "edge", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Queue.ByState["intent"] != 2 || len(st.Queue.Intents) != 2 || st.Queue.Intents[0].ID != op.ID || !strings.Contains(st.IntentNote, "1 of an edge alive") {
		t.Errorf("status --json: %+v", st)
	}
}

// Attack40 F1: writes the outbox could not record (a full disk) stayed in
// the local palace only, and edge status said nothing of them once space
// was back; it names them and the join that sends them.
func TestEdgeStatusNamesWritesThatStayedLocal(t *testing.T) {
	s := edgeOutbox(t)
	if err := outbox.NoteStayedLocal(s.Path(), outbox.StayedLocal{Primary: "http://primary.example/mcp", N: 3, Since: time.Now().Add(-time.Hour), Last: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	out := runOK(t, "edge", "status")
	// Worded for every cause the outbox had, not a full disk's alone
	// (attack106 F2).
	for _, want := range []string{"LOCAL ONLY 3 write(s) stayed in the local palace only", "`devbox-config join`", "a read-only mount made writable", "a newer devbox-config"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// sendBlocked is a primary whose sends wait until release closes (or the
// send's context ends); started closes when the first send is under way.
type sendBlocked struct {
	started, release chan struct{}
	once             *sync.Once
}

func (sendBlocked) Up() bool { return true }
func (b sendBlocked) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	b.once.Do(func() { close(b.started) })
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil, &outbox.RPCError{Code: -32000, Message: "database is locked"}
}

type tokenRefused struct{}

func (tokenRefused) Up() bool { return true }
func (tokenRefused) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	return nil, outbox.ErrUnauthorized
}

// Attack 4, 07 (a): `edge flush` while a running edge holds the flush
// lease says of each op it left that the lease's holder sends it, not the
// op's last error: the primary refused an earlier token, the token was
// fixed since, and "refused the token" sent the user chasing a fixed
// problem.
func TestEdgeFlushUnderAnotherLeaseSaysWhoSends(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok"})
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", srv.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	// The running edge: its own Store on the palace's outbox.
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, w := range []string{"w1", "w2"} {
		if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"` + w + `","room":"r","content":"c"}`), Wing: w}); err != nil {
			t.Fatal(err)
		}
	}
	// An earlier token was refused: each op's last error says so.
	(&outbox.Flusher{S: s, P: tokenRefused{}, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, Retries: -1}).Drain(ctx)
	if ops, _ := s.List(ctx, 10); len(ops) != 2 || !strings.Contains(outbox.Words(ops[1].Error), "refused the token") {
		t.Fatalf("setup: the ops should carry the refusal: %+v", ops)
	}
	// The edge now sends with the fixed token, holding the lease.
	p := sendBlocked{started: make(chan struct{}), release: make(chan struct{}), once: new(sync.Once)}
	running := make(chan struct{})
	go func() { defer close(running); (&outbox.Flusher{S: s, P: p}).Run(ctx) }()
	defer func() { close(p.release); cancel(); <-running }()
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the running edge sent nothing")
	}

	code, out, errOut := runCLI("edge", "flush", "--timeout", "5s")
	if code != 1 || !strings.Contains(errOut, "another edge process is flushing") {
		t.Fatalf("flush under another's lease: exit %d\n%s%s", code, out, errOut)
	}
	var lines int
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "not sent:") {
			continue
		}
		lines++
		if strings.Contains(l, "refused the token") || !strings.Contains(l, "holds the flush lease") {
			t.Errorf("an op left under another's lease reads:\n%s", l)
		}
	}
	if lines != 2 {
		t.Errorf("flush lists %d ops, want 2:\n%s", lines, out)
	}
}

// The unsent update_drawer of a drawer a pending delete_by_source may
// remove is held until the local palace answers the delete: status says
// so, and the outbox list marks it, instead of showing it as a queued
// write that simply has not gone yet.
func TestEdgeStatusShowsUpdatesHeldByADelete(t *testing.T) {
	s := edgeOutbox(t)
	ctx := context.Background()
	upd, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_notes_src_1","content":"edited offline"}`), Wing: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_notes_src_2","content":"another file"}`), Wing: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	call := []byte(`{"name":"mempalace_delete_by_source","arguments":{"source_file":"/work/a/README.md","dry_run":false}}`)
	p, err := s.IntendDelete(ctx, []outbox.Tombstone{{Kind: outbox.TombSource, Key: "/work/a/README.md"}}, nil, []string{"drawer_notes_src_1"}, "", call)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUnapplied(ctx, p); err != nil {
		t.Fatal(err)
	}
	s.Close()
	out := runOK(t, "edge", "status")
	if !strings.Contains(out, "WAITING    1 update_drawer") || !strings.Contains(out, "delete_by_source") {
		t.Errorf("status does not say an update waits for a delete:\n%s", out)
	}
	var st struct {
		Queue struct {
			BehindDelete []outbox.Op `json:"behind_delete"`
		} `json:"queue"`
	}
	if err := json.Unmarshal([]byte(runOK(t, "edge", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Queue.BehindDelete) != 1 || st.Queue.BehindDelete[0].ID != upd.ID {
		t.Errorf("status --json behind_delete: %+v, want the one update", st.Queue.BehindDelete)
	}
	list := runOK(t, "edge", "outbox", "list")
	for _, l := range strings.Split(list, "\n") {
		switch {
		case strings.Contains(l, upd.Short()) && !strings.Contains(l, "waits for a delete"):
			t.Errorf("the held update's row: %q", l)
		case strings.Contains(l, other.Short()) && strings.Contains(l, "delete"):
			t.Errorf("an update no delete holds is marked: %q", l)
		}
	}
}

// The edge's embedder record is evidence of one search, not a setting:
// status quotes it and says what clears it, not that merged search is off
// for good.
func TestEdgeStatusSaysWhatClearsAnEmbedderMismatch(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	edgeStatus{mismatch: "drawer d1, same text on both sides: local distance 0.1000, primary 0.7000"}.print(&b)
	line := b.String()
	if !strings.Contains(line, "embedder   MISMATCH") || !strings.Contains(line, "drawer d1") || !strings.Contains(line, "cleared by the next search") || strings.Contains(line, "merged search off)") {
		t.Fatalf("status's embedder line:\n%s", line)
	}
}

// A checkpoint the gateway took without items an admin deleted on the
// primary is done, and status lists it with what was left out, in full
// (the drawer ids), as done: nothing for the operator to retry.
func TestEdgeStatusListsACheckpointsItemsLeftOut(t *testing.T) {
	t.Parallel()
	words := "shared without 1 of its 2 items: an admin deleted them on the primary (drawer drawer_shared_gone_38009c97c3199040dc8d54e2); they stay in this devbox's palace only"
	o := outbox.Op{ID: strings.Repeat("ab", 32), Tool: "mempalace_checkpoint", State: outbox.Done, Error: json.RawMessage(`{"kind":"deleted-on-primary","message":"` + words + `"}`)}
	var b bytes.Buffer
	edgeStatus{stats: outbox.Stats{LeftOut: []outbox.Op{o}}}.print(&b)
	if out := b.String(); !strings.Contains(out, "LEFT OUT   "+o.Short()+" mempalace_checkpoint, done: "+words) || strings.Contains(out, "retry") {
		t.Fatalf("status's line for the checkpoint:\n%s", out)
	}
}

// edge flush names a checkpoint it sent that the primary took without
// items an admin deleted there, and not one an earlier flush sent.
func TestEdgeFlushNamesTheCheckpointsItSentInPart(t *testing.T) {
	t.Parallel()
	words := "shared without 1 of its 2 items: an admin deleted them on the primary (drawer drawer_shared_gone_38009c97c3199040dc8d54e2); they stay in this devbox's palace only"
	note := json.RawMessage(`{"kind":"deleted-on-primary","message":"` + words + `"}`)
	earlier := outbox.Op{ID: strings.Repeat("cd", 32), Tool: "mempalace_checkpoint", State: outbox.Done, Error: note}
	now := outbox.Op{ID: strings.Repeat("ab", 32), Tool: "mempalace_checkpoint", State: outbox.Done, Error: note}
	var b bytes.Buffer
	printSentInPart(&b, map[string]bool{earlier.ID: true}, []outbox.Op{earlier, now})
	if out := b.String(); !strings.Contains(out, "sent in part: "+now.Short()+" mempalace_checkpoint: ") || !strings.Contains(out, words) || strings.Contains(out, earlier.Short()) {
		t.Fatalf("flush's lines:\n%s", out)
	}
}

// A join killed half-way leaves bootstrap.json's target in_progress and
// its records in the join outbox: edge status prints a JOIN line and
// doctor join-interrupted, each with `join --resume` (before, edge status
// said "queue empty" and doctor "nothing to fix").
func TestEdgeStatusAndDoctorNameAnInterruptedJoin(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	if err := os.MkdirAll(filepath.Join(palace, "edge"), 0o700); err != nil {
		t.Fatal(err)
	}
	const target = "http://127.0.0.1:1/mcp"
	cp := `{"` + target + `": {"joined_at": null, "high_water": 0, "state": "in_progress", "outbox": "join-outbox-0123456789ab.sqlite", "updated_at": "2026-01-02T03:04:05Z"}}`
	if err := os.WriteFile(filepath.Join(palace, "edge", "bootstrap.json"), []byte(cp), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", target)
	for _, args := range [][]string{{"edge", "status"}, {"doctor", "--home", os.Getenv("HOME")}} {
		var out, errb bytes.Buffer
		run(args, &out, &errb)
		if !strings.Contains(out.String(), "a join to "+target+" stopped before it finished") || !strings.Contains(out.String(), "`devbox-config join --resume`") {
			t.Errorf("%v:\n%s%s", args, out.String(), errb.String())
		}
	}
}

// Attack42 M2: a broken record of writes that stayed local (not JSON, a
// directory, a symlink) made edge status print nothing but an error and
// edge flush fail after sending; both now show the outbox and name the
// record with its fix.
func TestABrokenStayedLocalRecordLeavesStatusAndFlushWorking(t *testing.T) {
	for _, kind := range []string{"garbage", "directory", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			s := edgeOutbox(t)
			s.Close()
			rec := filepath.Join(filepath.Dir(s.Path()), outbox.StayedLocalFile)
			if err := os.Remove(rec); err != nil {
				t.Fatal(err)
			}
			var err error
			switch kind {
			case "garbage":
				err = os.WriteFile(rec, []byte("garbage\n"), 0o600)
			case "directory":
				err = os.Mkdir(rec, 0o700)
			case "symlink":
				err = os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), rec)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{{"edge", "status"}, {"edge", "flush"}} {
				out := runOK(t, cmd...)
				for _, want := range []string{"queued 0", "LOCAL ONLY the record of writes that stayed local cannot be read: " + rec, "join --dry-run"} {
					if !strings.Contains(out, want) {
						t.Errorf("%v lacks %q:\n%s", cmd, want, out)
					}
				}
			}
		})
	}
}

// A dead op's error, as `edge outbox list` and `edge status` print it, is
// the primary's message: a line of its own, whatever the message holds
// (an escape that clears the screen, a line break that starts a fake
// DEAD line), and cut on a character, not inside one. Before, the message
// was printed raw and cut at its 80th byte.
func TestAnOpsErrorPrintsOnItsLine(t *testing.T) {
	t.Parallel()
	hostile := errorText(json.RawMessage(`{"kind":"refused","message":"no\u001b[2J\nDEAD       0000 forged: all good"}`))
	if strings.ContainsAny(hostile, "\x1b\n") || !strings.Contains(hostile, `\x1b[2J DEAD`) {
		t.Errorf("the primary's message printed as %q", hostile)
	}
	long := errorText(json.RawMessage(`{"kind":"refused","message":"` + strings.Repeat("é", 200) + `"}`))
	if !utf8.ValidString(long) || utf8.RuneCountInString(long) != 100 || !strings.HasPrefix(long, "refused by the primary: é") {
		t.Errorf("a long message printed as %q (%d characters)", long, utf8.RuneCountInString(long))
	}
	if got := errorText(nil); got != "" {
		t.Errorf("no error recorded printed as %q", got)
	}
}

// refusing refuses every call with its error: a grant's refusal (a later
// grant may let it through, so a dead op so refused holds its objects; one
// refused as written holds nothing), or arguments MemPalace cannot take.
type refusing struct{ err *outbox.RPCError }

func (refusing) Up() bool { return true }
func (r refusing) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	return nil, r.err
}

// deadThenTold queues w in a devbox's outbox, has a primary refuse it for
// good (dead), and returns the op and what edge status and edge flush then
// print, each.
func deadThenTold(t *testing.T, w outbox.Write, refusal *outbox.RPCError) (outbox.Op, map[string]string) {
	palace := filepath.Join(t.TempDir(), "palace")
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok"})
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", srv.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op, _ := s.Enqueue(ctx, w)
	(&outbox.Flusher{S: s, P: refusing{refusal}}).Drain(ctx)
	s.Close()
	said := map[string]string{}
	for _, cmd := range []string{"status", "flush"} {
		var out, errb bytes.Buffer
		run([]string{"edge", cmd}, &out, &errb)
		said["edge "+cmd] = out.String() + errb.String()
	}
	return op, said
}

// A dead op refused as written is one to drop, not to retry: a retry is
// refused again. edge status and edge flush say so (attack53 N2: both
// said "fix the cause, then retry").
func TestADeadOpRefusedAsWrittenIsToldToBeDropped(t *testing.T) {
	bad, said := deadThenTold(t, outbox.Write{Name: "mempalace_event_append", Payload: []byte(`{"type":"reply","stream":"s","from_agent":"pi@lab","to_agent":"a@b","correlation_id":"c1","status":"done","body":"b"}`)},
		&outbox.RPCError{Code: -32602, Message: "Invalid params: status='done' is not one of: applied, blocked"})
	want := "`devbox-config edge outbox drop " + bad.Short() + "`"
	for cmd, got := range said {
		if !strings.Contains(got, want) || strings.Contains(got, "fix the cause") {
			t.Errorf("%s:\n%s", cmd, got)
		}
	}
}

// An op the gateway's ledger refused as reused is, after a rollback of the
// gateway, the same write the newer one recorded: edge status and edge
// flush say to run that release again and retry it, not to write it anew
// (attack56 R2: "write it anew" and drop, for a write that had landed).
func TestADeadOpRefusedAsReusedIsToldToBeRetriedAfterARollback(t *testing.T) {
	op, said := deadThenTold(t, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`)},
		&outbox.RPCError{Code: -32602, Message: "devbox-config gateway: ledger: device dev, op id ab12: op id already used for a different write (first used with other arguments; now mempalace_add_drawer)"})
	want := []string{"another devbox-config release", "`devbox-config edge outbox retry " + op.Short() + "`", "docs/operator.md#upgrading-and-rolling-back", "do not write it anew"}
	for cmd, got := range said {
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s does not say %q:\n%s", cmd, w, got)
			}
		}
		if strings.Contains(got, "a retry is refused again") {
			t.Errorf("%s still says a retry is refused again:\n%s", cmd, got)
		}
	}
}

// A primary's refusal holding escape codes (an OSC title, a clear
// screen), a right-to-left override, a zero-width space, a NUL and a CR LF
// that starts a forged line is printed by edge status ("last error") and
// edge flush ("not sent:") with each shown as its escape (attack61 F3: raw).
func TestAPrimarysRefusalIsPrintedEscaped(t *testing.T) {
	_, said := deadThenTold(t, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`)},
		&outbox.RPCError{Code: -32602, Message: "refused \x1b]0;pwned\x07\x1b[2J \u202eevil\u202c \u200b NUL:\x00 END\r\n- evt_fake: task.request from \"admin@ops\""})
	for cmd, got := range said {
		for _, raw := range []string{"\x1b", "\x07", "\u202e", "\u200b", "\x00", "\r", "\n- evt_fake"} {
			if strings.Contains(got, raw) {
				t.Errorf("%s prints a raw %q:\n%q", cmd, raw, got)
			}
		}
		if !strings.Contains(got, `\x1b]0;pwned\x07`) || !strings.Contains(got, `\u202eevil`) {
			t.Errorf("%s does not show the refusal escaped:\n%q", cmd, got)
		}
	}
	if !strings.Contains(said["edge status"], "last error") {
		t.Errorf("edge status shows no last error:\n%s", said["edge status"])
	}
}

// A local palace filled with another model than the one configured is
// refused by MemPalace on every write (EmbeddingFunctionMismatchError):
// status says so on its embedder line, as doctor does. Before, it said
// "embedder   no mismatch seen" right after the edge's write was refused
// so (attack65 F3).
func TestEdgeStatusSaysThePalacesModelIsNotTheOneConfigured(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", "http://127.0.0.1:1/mcp")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	t.Setenv("MEMPALACE_EMBEDDING_MODEL", "openai-compat")
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	os.WriteFile(filepath.Join(palace, doctor.SidecarFile), []byte(`{"mempalace_drawers": {"model_name": "minilm", "dimension": 384}}`), 0o600)
	var out, errb bytes.Buffer
	run([]string{"edge", "status"}, &out, &errb)
	if got := out.String(); !strings.Contains(got, `embedder   MISMATCH: the local palace was filled with embedder "minilm"`) || !strings.Contains(got, `configures "openai-compat"`) || strings.Contains(got, "no mismatch seen") {
		t.Fatalf("status's embedder line:\n%s%s", got, errb.String())
	}
	t.Setenv("MEMPALACE_EMBEDDING_MODEL", "minilm")
	out.Reset()
	run([]string{"edge", "status"}, &out, &errb)
	if got := out.String(); !strings.Contains(got, "embedder   no mismatch seen (the local palace's recorded model is the one configured") {
		t.Fatalf("status with the palace's model:\n%s", got)
	}
}

// An outbox that is not a usable SQLite database (a truncated file) makes
// `edge status`, `edge flush` and `edge outbox list` exit 1 naming where
// the fix is, in the same words: before, each said only SQLite's "database
// disk image is malformed" (attack106 F3).
func TestEdgeCommandsOnACorruptOutboxPointToDoctor(t *testing.T) {
	s := edgeOutbox(t)
	for i := range 300 {
		if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"` + strconv.Itoa(i) + strings.Repeat("x", 500) + `"}`), Wing: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	path := s.Path()
	s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil { // as attack106 did: "database disk image is malformed"
		t.Fatal(err)
	}
	const fix = "`devbox-config doctor` (outbox-dead) says how to move it aside with its -wal and -shm and what that loses"
	for _, args := range [][]string{{"edge", "status"}, {"edge", "flush"}, {"edge", "outbox", "list"}} {
		code, _, errOut := runCLI(args...)
		if code != 1 || !strings.Contains(errOut, path) || !strings.HasSuffix(strings.TrimSpace(errOut), fix) {
			t.Errorf("%v: exit %d\n%s", args, code, errOut)
		}
	}
}

// While another process holds the outbox's lock (an edge session or a
// flush writing), the edge commands that must write to it say so plainly,
// with the file and what to do, not SQLite's words alone: an open that
// records the outbox's identity (edge outbox list, as edge status and
// flush open it), and edge flush readying the outbox; doctor's read-only
// open still reads it (attack110 F2).
func TestEdgeCommandsBesideALockedOutboxSaySo(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out SQLite's 10 s busy timeout twice: the integration tier")
	}
	for _, c := range []struct {
		args        []string
		newIdentity bool // the open writes it (as for a copied file)
	}{{[]string{"edge", "outbox", "list"}, true}, {[]string{"edge", "flush"}, false}} {
		s := edgeOutbox(t)
		path := s.Path()
		s.Close()
		holder := lockedOutbox(t, path, c.newIdentity)
		code, out, errOut := runCLI(c.args...)
		if all := out + errOut; code == 0 || !strings.Contains(all, path) || !strings.Contains(all, "another devbox-config process") ||
			!strings.Contains(all, "try again in a moment") || strings.Contains(all, "its identity") {
			t.Errorf("%v beside a locked outbox: exit %d\n%s", c.args, code, all)
		}
		if ro, err := outbox.OpenOptions(path, outbox.Options{ReadOnly: true}); err != nil {
			t.Errorf("doctor's read-only open beside a locked outbox: %v", err)
		} else {
			ro.Close()
		}
		holder.ExecContext(context.Background(), "ROLLBACK") // the lock ends here
	}
}

// retry, drop and delivered beside a locked outbox say so as flush does,
// with the file and what to do, not SQLite's words alone (attack113 F4).
func TestOutboxActsBesideALockedOutboxSaySo(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out SQLite's 10 s busy timeout three times: the integration tier")
	}
	for _, act := range []string{"retry", "drop", "delivered"} {
		s := edgeOutbox(t)
		op, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Wing: "w"})
		if err != nil {
			t.Fatal(err)
		}
		path := s.Path()
		s.Close()
		holder := lockedOutbox(t, path, false)
		code, out, errOut := runCLI("edge", "outbox", act, op.Short())
		if all := out + errOut; code != 1 || !strings.Contains(all, path) || !strings.Contains(all, "another devbox-config process") || !strings.Contains(all, "try again in a moment") {
			t.Errorf("edge outbox %s beside a locked outbox: exit %d\n%s", act, code, all)
		}
		holder.ExecContext(context.Background(), "ROLLBACK") // the lock ends here
	}
}

// lockedOutbox holds the outbox at path locked for writing (BEGIN
// EXCLUSIVE on a second connection) until the test ends; newIdentity
// first removes the identity an open reads, so that the next open writes one.
func lockedOutbox(t *testing.T, path string, newIdentity bool) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if newIdentity {
		if _, err := conn.ExecContext(ctx, "DELETE FROM meta WHERE key IN ('identity', 'identity_file')"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	return conn
}
