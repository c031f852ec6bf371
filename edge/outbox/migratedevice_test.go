package outbox_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// gatewayNaming is a gateway that names the edge's token dev and files
// what it is sent.
type gatewayNaming struct {
	dev     string
	removed []string
	refuse  bool // each write refused as written
	mu      sync.Mutex
	sent    []string
}

func (g *gatewayNaming) Up() bool { return true }
func (g *gatewayNaming) Device(ctx context.Context) deviceinfo.Info {
	return deviceinfo.Info{ID: g.dev, Removed: g.removed}
}
func (g *gatewayNaming) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	if g.refuse {
		return map[string]any{"success": false, "error": "no such room"}, nil
	}
	var a struct{ Content string }
	json.Unmarshal(args, &a) // a payload of the fixture's: an object
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sent = append(g.sent, a.Content)
	return map[string]any{"success": true, "drawer_id": "drawer_shared_f_" + a.Content[:2]}, nil
}

// Outside tester attack83 F6: an outbox an edge made before ops recorded
// the device they were queued as (9afaa28, f0f9e9f), holding a removed
// device's writes, migrated when the devbox is upgraded and given another
// device's token. The migration left them recording no device, and the
// flusher sent them as the new one. Now an op recording none whose
// stamped device the gateway lists as removed is held, dead
// (other-device), recorded as queued as that device, never sent; an op
// queued with no origin device is sent. (It failed before a116ed3: both
// devF writes were sent as devG.)
func TestAnOlderOutboxsOpsAreHeldAsTheDeviceThatQueuedThem(t *testing.T) {
	t.Parallel()
	sqlText, err := os.ReadFile(filepath.Join("testdata", "outbox-9afaa28.sql"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), outbox.FileName)
	db, err := sqlitewal.Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(string(sqlText)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := outbox.Open(path, "devG", "labG") // the upgraded devbox's .env: devG's token
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if st, err := s.Stats(ctx); err != nil || len(st.QueuedAs) != 0 {
		t.Errorf("before a flush, the ops count as queued as %v (%v), want none: no device was heard", st.QueuedAs, err)
	}
	g := &gatewayNaming{dev: "devG", removed: []string{"DEVF"}} // ids as the gateway spells them: case aside, one device (review28 D3)
	if _, err := (&outbox.Flusher{S: s, P: g}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if len(g.sent) != 1 || g.sent[0] != "a drawer queued with no origin device" {
		t.Errorf("sent as devG: %q, want only the op that names no device", g.sent)
	}
	dead, err := s.List(ctx, 10, outbox.Dead)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range dead {
		if f := outbox.FailureOf(op.Error); f.Kind != outbox.OtherDevice || op.TokenDevice != "devF" {
			t.Errorf("op %d is dead as %s, queued as %q", op.LocalSeq, f.Kind, op.TokenDevice)
		}
	}
	if len(dead) != 2 {
		t.Errorf("%d ops held, want devF's 2: %+v", len(dead), dead)
	}
}

// Reviewer 27 D1: an older edge stamped its ops with .env's
// MEMPALACE_ORIGIN_DEVICE, which need not be the gateway's id for the
// token (a uuid, as the ladder's hint makes one; doctor only warns). The
// upgrade recorded each op as queued as that id, and the flusher then held
// every one ("queued as device <uuid>; the gateway names this token
// laptop"). Only what the gateway said counts: the device header the old
// edge kept, where it kept one; else none, and the ops are sent as before.
func TestAnOlderOutboxsOpsStampedWithAnotherEnvIDAreSent(t *testing.T) {
	t.Parallel()
	sqlText, err := os.ReadFile(filepath.Join("testdata", "outbox-9afaa28.sql"))
	if err != nil {
		t.Fatal(err)
	}
	const uuid = "0b9e3c1a-5d2f-4e8a-9c71-3f6d2b8a4e10"
	for name, kept := range map[string]string{
		"no header kept":     "",
		"the header it kept": `INSERT INTO meta(key, value) VALUES('device_seen', '{"version":1,"id":"laptop","label":"lap"}');`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), outbox.FileName)
			db, err := sqlitewal.Open(path, "FULL")
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.Exec(string(sqlText) + `;UPDATE ops SET origin_device='` + uuid + `';` + kept)
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			s, err := outbox.Open(path, uuid, "lap")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			g := &gatewayNaming{dev: "laptop"}
			if _, err := (&outbox.Flusher{S: s, P: g}).Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			if dead, err := s.List(context.Background(), 10, outbox.Dead); err != nil || len(dead) != 0 || len(g.sent) != 3 {
				t.Errorf("sent %q; %d held (%v), want the 3 queued ops sent", g.sent, len(dead), err)
			}
		})
	}
}

// Reviewer 28 O1: the removed-device hold is for an outbox's ops from
// before ops recorded the device they were queued as, not for every op
// recording none. A devbox re-provisioned after its device "laptop" was
// removed, with "laptop-2"'s token and an .env still naming laptop (doctor
// only warns), queues writes before its edge first hears the gateway:
// they are this token's, and are sent, not held as laptop's.
func TestAWriteQueuedBeforeTheFirstAnswerUnderAStaleEnvDeviceIsSent(t *testing.T) {
	t.Parallel()
	s, err := outbox.OpenOptions(filepath.Join(t.TempDir(), outbox.FileName), outbox.Options{Device: "laptop", Label: "lap", Token: func() string { return "laptop-2's token" }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"written under laptop-2's token"}`)}); err != nil {
		t.Fatal(err)
	}
	g := &gatewayNaming{dev: "laptop-2", removed: []string{"laptop"}}
	if _, err := (&outbox.Flusher{S: s, P: g}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if dead, err := s.List(ctx, 10, outbox.Dead); err != nil || len(dead) != 0 || len(g.sent) != 1 {
		t.Errorf("sent %q; %d held (%v), want the write sent as laptop-2", g.sent, len(dead), err)
	}
}

// Outside tester attack94 F4: a write queued under dev-z's token while
// the edge never heard the gateway (no device recorded), dev-z then
// removed and .env given dev-w's token, still naming dev-z. It was sent,
// and stamped as dev-w, since O1's fix sent every op recording no device
// unless it came from an older outbox. Now an op records the token it was
// queued under: one queued under another token than .env's now is held,
// dead (other-device), as dev-z's, until `retry` sends it as dev-w. One
// queued under a token issued again to the same device is sent.
func TestAWriteQueuedUnderARemovedDevicesTokenIsHeld(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		dev    string // the device the gateway names the new token
		held   bool
		origin string // MEMPALACE_ORIGIN_DEVICE (optional)
	}{
		"another device's token":      {"dev-w", true, "dev-z"},
		"the same device's new token": {"dev-z", false, "dev-z"},
		// attack98 F3: .env named no device; the token changed all the same.
		"another token, no device in .env": {"dev-w", true, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			token := "dev-z's token"
			s, err := outbox.OpenOptions(filepath.Join(t.TempDir(), outbox.FileName), outbox.Options{Device: c.origin, Label: "laptopz", Token: func() string { return token }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"written under dev-z's token"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := s.Stats(ctx); err != nil || len(st.QueuedAs) != 0 {
				t.Errorf("the op counts as queued as %v (%v), want none: no device was heard", st.QueuedAs, err)
			}
			token = "the new token"
			g := &gatewayNaming{dev: c.dev, removed: []string{"dev-z"}}
			f := &outbox.Flusher{S: s, P: g}
			if _, err := f.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, op.LocalSeq)
			if err != nil {
				t.Fatal(err)
			}
			if !c.held {
				if got.State != outbox.Done || len(g.sent) != 1 {
					t.Errorf("the op is %s, sent %q: want it sent", got.State, g.sent)
				}
				return
			}
			fail := outbox.FailureOf(got.Error)
			if len(g.sent) != 0 || got.State != outbox.Dead || fail.Kind != outbox.OtherDevice || got.TokenDevice != c.origin || !strings.Contains(fail.Message, "another token") {
				t.Fatalf("sent %q; the op is %s (%s: %s), queued as %q: want it held as dev-z's, queued under another token", g.sent, got.State, fail.Kind, fail.Message, got.TokenDevice)
			}
			if _, err := s.RetryAs(ctx, op.ID, func(context.Context) (string, error) { return "dev-w", nil }, false); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			if len(g.sent) != 1 {
				t.Errorf("after retry, sent %q: want the write sent as dev-w", g.sent)
			}
		})
	}
}

// A retry keeps the token an op was queued under: one refused, then
// retried once .env has another device's token, is held, not sent as it.
func TestARetriedOpKeepsTheTokenItWasQueuedUnder(t *testing.T) {
	t.Parallel()
	token := "dev-z's token"
	s, err := outbox.OpenOptions(filepath.Join(t.TempDir(), outbox.FileName), outbox.Options{Device: "dev-z", Label: "laptopz", Token: func() string { return token }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"written under dev-z's token"}`)})
	if err != nil {
		t.Fatal(err)
	}
	g := &gatewayNaming{dev: "dev-z", refuse: true}
	f := &outbox.Flusher{S: s, P: g}
	if _, err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	token, g.dev, g.refuse = "dev-w's token", "dev-w", false
	if _, err := s.Retry(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, op.LocalSeq); err != nil || len(g.sent) != 0 || outbox.FailureOf(got.Error).Kind != outbox.OtherDevice {
		t.Errorf("sent %q; the op is %s (%s, %v): want it held as dev-z's", g.sent, got.State, outbox.FailureOf(got.Error).Kind, err)
	}
}

// review30 F3 (attack80 F3's pattern): `retry --force` on a write still
// queued under another token than .env's now, before any flush held it,
// said "queued to be sent again" and left it as it was, so the next flush
// held it. Forced, it is recorded as the token's device now, and sent.
func TestAForcedRetryOfAnOpQueuedUnderAnotherTokenSendsIt(t *testing.T) {
	t.Parallel()
	token := "dev-z's token"
	s, err := outbox.OpenOptions(filepath.Join(t.TempDir(), outbox.FileName), outbox.Options{Device: "dev-z", Label: "laptopz", Token: func() string { return token }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"written under dev-z's token"}`)})
	if err != nil {
		t.Fatal(err)
	}
	token = "dev-w's token"
	if _, err := s.RetryAs(ctx, op.ID, func(context.Context) (string, error) { return "dev-w", nil }, true); err != nil {
		t.Fatal(err)
	}
	g := &gatewayNaming{dev: "dev-w", removed: []string{"dev-z"}}
	if _, err := (&outbox.Flusher{S: s, P: g}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, op.LocalSeq); err != nil || got.State != outbox.Done || len(g.sent) != 1 {
		t.Errorf("after retry --force, the op is %s (%v: %v), sent %q: want it sent as dev-w", got.State, outbox.FailureOf(got.Error).Message, err, g.sent)
	}
}
