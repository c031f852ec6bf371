package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// heldNote is a gateway's note on a kg_supersede it held (gateway/kgorigin.go).
const heldNote = `devbox-config gateway: the primary held "postgres" closed already (ended 2026-06-01T00:00:00Z) and "mysql" current, device laptop-7f3a's (label laptop), from 2026-06-01T00:00:00Z, before this supersede arrived (another device's supersede reached it first, or an earlier one of this device's): nothing was filed, so "sqlite" was not made current (MemPalace would have opened it beside "mysql": two current values); to make it the value: supersede "mysql" with it (ending another device's fact is for an admin device), or kg_add it if both are meant to be current`

// holdingGateway answers every write as a gateway answers a kg_supersede
// it held: success, held_by, valid_from_kept and the note.
type holdingGateway struct{}

func (holdingGateway) Up() bool { return true }

func (holdingGateway) Call(context.Context, string, json.RawMessage) (map[string]any, error) {
	return map[string]any{"success": true, "held_by": "laptop-7f3a", "valid_from_kept": "2026-06-01T00:00:00Z", "already_closed": "2026-06-01T00:00:00Z", "note": heldNote}, nil
}

// The flusher's log line for a held write (what `edge flush` prints on
// stderr) carries the gateway's note whole, what to do included: it said
// only that something was held, and by whom (attack112 F3).
func TestAHeldWritesLogLineCarriesTheNote(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "desk-1", "desktop")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_kg_supersede", Payload: []byte(`{"subject":"svc_alpha","predicate":"uses_db","old_object":"postgres","new_object":"sqlite"}`)}); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if _, err := (&outbox.Flusher{S: s, P: holdingGateway{}, Log: slog.New(slog.NewTextHandler(&log, nil))}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if fix := `to make it the value: supersede \"mysql\" with it`; !strings.Contains(log.String(), fix) || !strings.Contains(log.String(), "held_by=laptop-7f3a") {
		t.Errorf("the held write's log line lacks %s:\n%s", fix, log.String())
	}
}

// madeAtGateway records, for each call, the made-at the flusher put on it.
type madeAtGateway struct{ made map[string]time.Time }

func (madeAtGateway) Up() bool { return true }

func (g madeAtGateway) Call(ctx context.Context, tool string, _ json.RawMessage) (map[string]any, error) {
	g.made[tool] = outbox.MadeAtFrom(ctx)
	return map[string]any{"success": true}, nil
}

// A kg_add is sent with when its op was made (the Primary puts it in
// _meta["devbox-config/made-at"]): a gateway holds an add made offline
// before another device's replacement of its value landed, whatever its
// valid_from (attack113 F1; review35 R5: only a real-MemPalace test
// covered it). Other writes carry none.
func TestAKGAddIsSentWithWhenItWasMade(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "desk-1", "desktop")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	before := time.Now()
	for _, w := range []outbox.Write{
		{Name: "mempalace_kg_add", Payload: []byte(`{"subject":"svc","predicate":"lead","object":"erin"}`)},
		{Name: "mempalace_kg_invalidate", Payload: []byte(`{"subject":"svc","predicate":"lead","object":"erin","ended":"2026-06-01"}`)},
	} {
		if _, err := s.Enqueue(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	g := madeAtGateway{made: map[string]time.Time{}}
	if _, err := (&outbox.Flusher{S: s, P: g, Log: slog.New(slog.DiscardHandler)}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if at := g.made["mempalace_kg_add"]; at.Before(before.Add(-time.Second)) || at.After(time.Now()) {
		t.Errorf("the kg_add's made-at: %v, want when it was queued (after %v)", at, before)
	}
	if at, sent := g.made["mempalace_kg_invalidate"]; !sent || !at.IsZero() {
		t.Errorf("the kg_invalidate's made-at: %v (sent %v), want none", at, sent)
	}
}
