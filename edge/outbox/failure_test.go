package outbox_test

import (
	"os"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// docs/replication.md's failure table says what outbox.Rules does: every
// kind, with its class, and no other.
func TestTheDocsFailureTableIsTheCodes(t *testing.T) {
	b, err := os.ReadFile("../../docs/replication.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for kind, rule := range outbox.Rules {
		row := "| `" + kind.String() + "` | " + string(rule.Class) + " |"
		if !strings.Contains(doc, row) {
			t.Errorf("docs/replication.md has no row %q", row)
		}
	}
	if n := strings.Count(doc[strings.Index(doc, "## Failure classes"):strings.Index(doc, "## Look-ups")], "\n| `"); n != len(outbox.Rules) {
		t.Errorf("the docs' failure table has %d rows, the code %d kinds", n, len(outbox.Rules))
	}
	if !strings.Contains(doc, "dead after **5** refused attempts") {
		t.Error("the docs do not say N")
	}
}
