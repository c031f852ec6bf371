package catalogue

import "testing"

// The reference's own example (mempalace-surface §4): wing w, room r,
// content hello.
func TestDrawerIDRecipe(t *testing.T) {
	if got := DrawerID("w", "r", "hello"); got != "drawer_w_r_5f071391b1962154702ebc8c" {
		t.Fatalf("DrawerID(w, r, hello) = %s", got)
	}
}
