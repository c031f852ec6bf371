package outbox

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
)

// A dead op is told to the agent by what it wrote: its wing and room, or,
// for a write that names no wing, the drawer, the knowledge graph's
// subject or the source it names. Before, a dead kg_add or
// delete_by_source was named by its tool alone (outside tester, attack8).
func TestDeadOpsNameWhatTheyWrote(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, w := range []Write{
		{Name: catalogue.Prefix + "kg_add", Payload: []byte(`{"subject":"fleet token","predicate":"rotated_by","object":"ops"}`)},
		{Name: catalogue.Prefix + "delete_by_source", Payload: []byte(`{"source_file":"/work/a/README.md","dry_run":false}`)},
		{Name: catalogue.Prefix + "update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"c"}`)},
	} {
		if _, err := s.Enqueue(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.flushDB.Exec(`UPDATE ops SET state='dead', error_json='{"message":"refused"}'`); err != nil {
		t.Fatal(err)
	}
	ops, err := s.DeadOps(ctx)
	if err != nil || len(ops) != 3 {
		t.Fatalf("dead ops %+v (%v)", ops, err)
	}
	for i, want := range []string{"fleet token", "/work/a/README.md", "drawer_w_r_1"} {
		if ops[i].Object != want {
			t.Errorf("%s names %q, want %q", ops[i].Tool, ops[i].Object, want)
		}
	}
}
