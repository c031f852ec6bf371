package catalogue_test

import (
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// A fact MemPalace files under one entity id is asked for under that id:
// Python's str.lower() gives ΟΔΟΣ a final sigma and İ a dot above.
func TestEntityIDLowersAsPython(t *testing.T) {
	for in, want := range map[string]string{
		"ΟΔΟΣ":     "οδος",
		"ΟΔΟΣ'":    "οδος",
		"ΟΔΟΣ ΝΕΑ": "οδος_νεα",
		"ΣΑ":       "σα",
		"Σ":        "σ",
		"İx":       "i\u0307x",
		"Straße":   "straße",
	} {
		if got := EntityID(in); got != want {
			t.Errorf("EntityID(%q) = %q, want %q", in, got, want)
		}
	}
	// The diary wing the gateway authorizes is the one MemPalace files in.
	if got := DiaryWingOf("ΟΔΟΣ ΝΕΑ"); got != "wing_οδος_νεα" {
		t.Errorf("DiaryWingOf(ΟΔΟΣ ΝΕΑ) = %q, want wing_οδος_νεα", got)
	}
}

// TestRealEntityIDIsMemPalaces: EntityID, PredicateID and DiaryWingOf are
// what the real MemPalace makes of a name (sanitize_kg_value /
// sanitize_name, then its lower(), spaces and apostrophes; the diary wing
// of an agent), over every code point alone and over
// strings of the characters Python's lower() treats by context.
func TestRealEntityIDIsMemPalaces(t *testing.T) {
	venv := realpalace.Venv(t)
	var corpus []string
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if utf8.ValidRune(r) && r != 0 {
			corpus = append(corpus, "a"+string(r)+"b", string(r))
		}
	}
	corpus = append(corpus, "ΟΔΟΣ", "ΟΔΟΣ'", "ΟΔΟΣ.", "Σ̈Α", "ΑΣ̈", "ΑΣ̈Β", "ΟΔΟΣ ΝΕΑ", "İstanbul", "İ", "STRASSE ß ẞ",
		"ﬁle ﬀ", "Ǆ ǅ ǆ", "Å Å", "ΆΣ", "1Σ", "ʰΣ", "ᾼΣ", "ΑʹΣ", "Σ\u00ad", "Σ\u200dΑ")
	pool := []rune("ΣσςΑαİIıi ̇̈'.:·’\u00ad\u200dʰᴬǅ1_-ß Åﬁ")
	rng := rand.New(rand.NewPCG(18, 6))
	for range 20000 {
		rs := make([]rune, 1+rng.IntN(8))
		for i := range rs {
			if rng.IntN(8) == 0 {
				rs[i] = rune(rng.IntN(0x30000))
				if !utf8.ValidRune(rs[i]) || rs[i] == 0 {
					rs[i] = 'x'
				}
			} else {
				rs[i] = pool[rng.IntN(len(pool))]
			}
		}
		corpus = append(corpus, string(rs))
	}
	in, err := json.Marshal(corpus)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-c", `
import json, sys
from mempalace.config import sanitize_kg_value, sanitize_name
from mempalace.knowledge_graph import KnowledgeGraph
def ids(s, sanitize, f):
    try:
        return f(sanitize(s))
    except ValueError:
        return None
out = [[ids(s, sanitize_kg_value, lambda v: KnowledgeGraph._entity_id(None, v)),
        ids(s, sanitize_name, lambda v: v.lower().replace(" ", "_")),
        ids(s, sanitize_name, lambda v: "wing_" + v.lower().replace(" ", "_"))] for s in json.load(sys.stdin)]
json.dump(out, sys.stdout)
`)
	cmd.Stdin = strings.NewReader(string(in))
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var want [][3]*string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(corpus) {
		t.Fatalf("python answered %d of %d", len(want), len(corpus))
	}
	bad := 0
	for i, s := range corpus {
		for j, got := range []string{EntityID(s), PredicateID(s), DiaryWingOf(SanitizedName(s))} {
			if w := want[i][j]; w != nil && *w != got && bad < 20 {
				bad++
				t.Errorf("%q: Go %q (%+q), MemPalace %q (%+q)", s, got, got, *w, *w)
			}
		}
	}
}
