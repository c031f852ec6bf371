package edge

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway"
)

// cutPrimary is a short-lived edge's way to the primary: its call of tool
// never answers, and the process exits (ctx cancelled) while it waits.
type cutPrimary struct {
	outbox.Primary
	tool    string
	reached chan struct{}
}

func (c cutPrimary) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	if tool == c.tool {
		close(c.reached)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return c.Primary.Call(ctx, tool, args)
}

// A diary entry whose first attempt was cut before it reached the primary
// (the edge exited during its fence read, or while its send waited) is
// sent by the next process, not taken for an equal entry another palace
// of the same device and agent wrote meanwhile. Behind a gateway with an
// op-id ledger the resend goes under the op's id (docs/replication.md:
// "a resend is answered from its ledger"); a fence read that did not
// finish leaves the op unsent, not maybe applied. (Found by an outside
// attacker: attack/diary-same-text.sh, a write lost.)
func TestDiaryEntryCutBeforeSendingIsNotLost(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	cases := []struct {
		name       string
		viaGateway bool
		cutAt      string
	}{
		{"ledger, send cut", true, "mempalace_diary_write"},
		{"ledger, fence read cut", true, "mempalace_list_drawers"},
		{"no gateway, fence read cut", false, "mempalace_list_drawers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, srv := startPrimary(t)
			url, token := srv.URL(), testToken
			if c.viaGateway {
				var tokens map[string]string
				url, tokens = testGateway(t, srv.URL(), gateway.Device{ID: "laptop", Label: "laptop", Read: []string{"*"}, Write: []string{"*"}, KG: "write",
					Agents: []string{"me@laptop"}, WriteRate: 10000, ReadRate: 10000})
				token = tokens["laptop"]
			}
			dir := t.TempDir()
			// One process of one palace: an outbox, a fresh primary
			// connection, a diary_write queued and flushed.
			write := func(palace string, cut string) {
				t.Helper()
				s, err := outbox.Open(filepath.Join(dir, palace+".sqlite"), "laptop", "laptop")
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"me","entry":"standup: nothing new"}`)}); err != nil {
					t.Fatal(err)
				}
				p := NewPrimary(url, func() string { return token }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 2 * time.Second})
				defer p.Close()
				f := &outbox.Flusher{S: s, P: FlushTarget(p), Log: slog.New(slog.DiscardHandler), StopGrace: 50 * time.Millisecond} // a cut send is not waited for
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if cut != "" {
					reached := make(chan struct{})
					f.P = cutPrimary{FlushTarget(p), cut, reached}
					go func() { <-reached; cancel() }()
				}
				f.Drain(ctx)
			}
			flush := func(palace string) outbox.Stats {
				t.Helper()
				s, err := outbox.Open(filepath.Join(dir, palace+".sqlite"), "laptop", "laptop")
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				p := NewPrimary(url, func() string { return token }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 2 * time.Second})
				defer p.Close()
				s.ClearBackoff(context.Background())
				f := &outbox.Flusher{S: s, P: FlushTarget(p), Log: slog.New(slog.DiscardHandler)}
				if _, err := f.Drain(context.Background()); err != nil {
					t.Fatal(err)
				}
				st, err := s.Stats(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			write("laptop", "")
			write("laptop2", c.cutAt) // the same device token and agent: another palace
			write("laptop", "")
			st := flush("laptop2")
			if n := st.ByState[outbox.Done]; n != 1 {
				t.Fatalf("laptop2's op not done: %+v", st.ByState)
			}
			p := NewPrimary(url, func() string { return token }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 2 * time.Second})
			defer p.Close()
			res, err := FlushTarget(p).Call(context.Background(), "mempalace_diary_read", []byte(`{"agent_name":"me","last_n":50}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			if n := strings.Count(string(b), "standup: nothing new"); n != 3 {
				t.Errorf("entries on the primary: %d, want 3 (three writes were made): %s", n, b)
			}
		})
	}
}
