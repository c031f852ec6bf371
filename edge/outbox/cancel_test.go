package outbox_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

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
	n, err := s.CancelUnsentAdds(ctx, []string{id})
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
	if n, _ := s.CancelUnsentAdds(ctx, []string{catalogue.DrawerID("notes", "r", "a note to keep")}); n != 0 {
		t.Fatalf("cancelled %d adds already sent", n)
	}
}
