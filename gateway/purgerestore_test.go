package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/joakimp/devbox-config/gateway/trash"
)

// purgeWhenFiled is a transport that purges ref from the trash just
// before the restore's add_drawer reaches the primary: a purge that comes
// while a restore holds the drawer, with no timing.
type purgeWhenFiled struct {
	bin  *trash.Store
	ref  string
	once sync.Once
	live []trash.Drawer
	err  error
}

func (p *purgeWhenFiled) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"mempalace_add_drawer"`)) {
			p.once.Do(func() { _, p.live, p.err = p.bin.Purge(req.Context(), p.ref) })
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// A purge of a drawer a restore put back, or holds while it puts it back,
// says the content is in the palace under the id it came back as, and the
// trash keeps the restore's record beside the purge (before: the purge
// said "its content is gone", and trash list showed only the purge, while
// the drawer was live on the primary; attack46 N3).
func TestPurgeOfARestoredDrawerSaysItIsInThePalace(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := g.tokens["admin-0001"]
	ctx := context.Background()
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	do := func(t *testing.T, tool string, args map[string]any) map[string]any {
		t.Helper()
		res, rpc, _ := g.call(admin, tool, args)
		if rpc != nil || res["success"] == false {
			t.Fatalf("%s %v: %v %v", tool, args, res, rpc)
		}
		return res
	}
	deleted := func(t *testing.T, content string) (string, int64) {
		t.Helper()
		id := do(t, "add_drawer", map[string]any{"wing": "shared", "room": "leak", "content": content})["drawer_id"].(string)
		do(t, "delete_drawer", map[string]any{"drawer_id": id})
		return id, g.kept(t)[0].ID
	}
	onPrimary := func(id string) any {
		res, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id})
		return res["content"]
	}
	recorded := func(t *testing.T, del int64, id string) trash.Drawer {
		t.Helper()
		d, err := bin.Get(ctx, del)
		if err != nil || len(d.Drawers) != 1 {
			t.Fatalf("delete %d: %+v %v", del, d, err)
		}
		dr := d.Drawers[0]
		if dr.PurgedAt == nil || dr.RestoredAt == nil || dr.RestoredAs != id || dr.RestoringAt != nil || !strings.Contains(dr.Live(), "restored") || !strings.Contains(dr.Live(), id) {
			t.Fatalf("the trash after the purge of a restored drawer: purged %v, restored %v as %q, held %v: %q", dr.PurgedAt, dr.RestoredAt, dr.RestoredAs, dr.RestoringAt, dr.Live())
		}
		return dr
	}

	t.Run("restored, then purged", func(t *testing.T) {
		id, del := deleted(t, "oops pasted AWS key AKIASEQUENTIAL1 zebra")
		if rs, err := g.restorer(t).Restore(ctx, []string{id}); err != nil || rs[0].Err != nil {
			t.Fatalf("restore: %+v %v", rs, err)
		}
		ids, live, err := bin.Purge(ctx, id)
		if err != nil || len(ids) != 1 || len(live) != 1 || live[0].ID != id || live[0].RestoredAs != id || !strings.Contains(live[0].Live(), "is in the palace") {
			t.Fatalf("the purge of a restored drawer: %v %+v %v", ids, live, err)
		}
		recorded(t, del, id)
		rs, _ := g.restorer(t).Restore(ctx, []string{id})
		if len(rs) != 1 || rs[0].Err == nil || !strings.Contains(rs[0].Err.Error(), "purged") || !strings.Contains(rs[0].Err.Error(), "restored") {
			t.Fatalf("a restore after the purge: %+v", rs)
		}
		if onPrimary(id) == nil {
			t.Fatal("the restored drawer is not on the primary: the test proves nothing")
		}
	})
	t.Run("purged while a restore holds it", func(t *testing.T) {
		const leak = "oops pasted AWS key AKIACONCURRENT2 zebra"
		id, del := deleted(t, leak)
		p := &purgeWhenFiled{bin: bin, ref: id}
		r := g.restorer(t)
		r.Client = &http.Client{Transport: p}
		rs, err := r.Restore(ctx, []string{id})
		if err != nil || len(rs) != 1 || rs[0].Err != nil || onPrimary(id) != leak {
			t.Fatalf("restore: %+v %v", rs, err)
		}
		if p.err != nil || len(p.live) != 1 || p.live[0].RestoringAt == nil || !strings.Contains(p.live[0].Live(), "a restore took it") {
			t.Fatalf("the purge during the restore did not say a restore holds the drawer: %+v %v", p.live, p.err)
		}
		recorded(t, del, id)
	})
	// Started together, either comes first, and what each says holds.
	t.Run("at once", func(t *testing.T) {
		for i := range 4 {
			content := fmt.Sprintf("oops pasted AWS key AKIARACE%d zebra", i)
			id, _ := deleted(t, content)
			var wg sync.WaitGroup
			var rs []Restored
			var live []trash.Drawer
			var perr error
			wg.Add(2)
			go func() { defer wg.Done(); rs, _ = g.restorer(t).Restore(ctx, []string{id}) }()
			go func() { defer wg.Done(); _, live, perr = bin.Purge(ctx, id) }()
			wg.Wait()
			if perr != nil || len(rs) != 1 {
				t.Fatalf("purge %v, restore %+v", perr, rs)
			}
			back := onPrimary(id) == content
			switch {
			case rs[0].Err == nil && (len(live) != 1 || !back):
				t.Fatalf("the restore put %s back (on the primary: %v) and the purge said nothing of it: %+v", id, back, live)
			case rs[0].Err != nil && (len(live) != 0 || back || !strings.Contains(rs[0].Err.Error(), "purged")):
				t.Fatalf("the restore was refused (%v), yet the purge named it %+v or the primary holds it (%v)", rs[0].Err, live, back)
			}
		}
	})
}
