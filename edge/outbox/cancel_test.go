package outbox_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// A drawer deleted on this device before its add_drawer was sent never
// reaches the primary (found by an outside tester: a secret pasted by
// mistake and deleted at once was uploaded on the next flush, where every
// device could read it). An add that may have landed already (a send
// without an answer) is not cancelled: its delete follows it as before.
func TestDeleteBeforeSendCancelsTheAdd(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	secret := `{"wing":"notes","room":"r","content":"api key pasted by mistake"}`
	keep := `{"wing":"notes","room":"r","content":"a note to keep"}`
	for _, p := range []string{secret, keep} {
		if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(p)}); err != nil {
			t.Fatal(err)
		}
	}
	id := catalogue.DrawerID("notes", "r", "api key pasted by mistake")
	n, err := s.CancelUnsentWrites(ctx, []string{id}, nil)
	if err != nil || n != 1 {
		t.Fatalf("cancelled %d, %v; want 1", n, err)
	}
	pl, _ := fakepalace.New(fakepalace.Options{})
	if _, err := (&outbox.Flusher{S: s, P: memPrimary{pl}}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := memPrimary{pl}.Call(ctx, "mempalace_list_drawers", json.RawMessage(`{"wing":"notes"}`))
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	drawers, _ := res["drawers"].([]any)
	for _, d := range drawers {
		m, _ := d.(map[string]any)
		c, _ := m["content_preview"].(string)
		on = append(on, strings.TrimSpace(c))
	}
	if got := strings.Join(on, "|"); got != "a note to keep" {
		t.Fatalf("on the primary: %q, want only the note to keep", got)
	}
	if n, _ := s.CancelUnsentWrites(ctx, []string{catalogue.DrawerID("notes", "r", "a note to keep")}, nil); n != 0 {
		t.Fatalf("cancelled %d adds already sent", n)
	}
}

// A deleted diary entry's unsent diary_write is cancelled too: of two
// equal entries queued, the one written when the deleted entry was (the
// oldest queued at or after its time), and nothing for an entry whose
// text or agent no queued op has.
func TestDeleteBeforeSendCancelsTheDiaryEntry(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s, err := outbox.OpenOptions(filepath.Join(t.TempDir(), outbox.FileName), outbox.Options{Device: "dev", Label: "lab", Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const text = "standup: nothing new"
	wing := catalogue.DiaryWingOf("Me")
	var ops []outbox.Op
	var written []time.Time
	for range 2 {
		written = append(written, clock)
		o, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"Me","entry":"` + text + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o)
		clock = clock.Add(24 * time.Hour)
	}
	states := func() string {
		var out []string
		for _, o := range ops {
			g, err := s.Get(ctx, o.LocalSeq)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, g.State.String())
		}
		return strings.Join(out, ",")
	}
	for _, en := range []outbox.DeletedEntry{{Agent: "me", Text: "another text", Written: written[0]}, {Agent: "you", Text: text, Written: written[0]}} {
		if n, err := s.CancelUnsentDiaries(ctx, []outbox.DeletedEntry{en}); err != nil || n != 0 {
			t.Fatalf("%+v cancelled %d, %v; want none", en, n, err)
		}
	}
	if n, err := s.CancelUnsentDiaries(ctx, []outbox.DeletedEntry{{Agent: "me", Text: text, Wing: wing, Written: written[1]}}); err != nil || n != 1 || states() != "queued,done" {
		t.Fatalf("deleting the second entry cancelled %d (%v): ops %s, want queued,done", n, err, states())
	}
	if n, err := s.CancelUnsentDiaries(ctx, []outbox.DeletedEntry{{Agent: "me", Text: text, Wing: wing, Written: written[0]}}); err != nil || n != 1 || states() != "done,done" {
		t.Fatalf("deleting the first entry cancelled %d (%v): ops %s, want done,done", n, err, states())
	}
}
