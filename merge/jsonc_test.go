package merge

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tailscale/hujson"
)

var entry = []byte(`{"type":"local","command":["mempalace-mcp"],"enabled":true}`)

func TestSetKeepsEveryOtherByte(t *testing.T) {
	in := "{\n  // lead\n  \"mcp\": {\n    \"mempalace\": {\"type\": \"remote\", /* gone */ \"url\": \"u\"}, // stays\n    \"x\": 1,\n  },\n  \"y\": [1,2,],\n}\n"
	d, err := ParseDoc([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Set(entry, "mcp", "mempalace"); err != nil {
		t.Fatal(err)
	}
	out := string(d.Bytes())
	start := strings.Index(in, `{"type": "remote"`)
	end := strings.Index(in, `, // stays`)
	if !strings.HasPrefix(out, in[:start]) || !strings.HasSuffix(out, in[end:]) {
		t.Fatalf("bytes outside the value changed:\n%s", out)
	}
	if strings.Contains(out, "gone") {
		t.Errorf("comment inside the replaced value survived:\n%s", out)
	}
	got, _ := d.Get("mcp", "mempalace")
	if !jsonEqual(t, got, entry) {
		t.Errorf("Get after Set = %s", got)
	}
}

func TestSetCreatesParentsAndSchemaOrder(t *testing.T) {
	d, _ := ParseDoc([]byte("{\n  \"$schema\": \"s\",\n  \"model\": \"m\"\n}\n"))
	if err := d.Set(entry, "mcp", "mempalace"); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"$schema\": \"s\",\n  \"mcp\": {\n    \"mempalace\": {\n      \"type\": \"local\",\n      \"command\": [\"mempalace-mcp\"],\n      \"enabled\": true\n    }\n  },\n  \"model\": \"m\"\n}\n"
	if got := string(d.Bytes()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSetThroughNonObjectFails(t *testing.T) {
	d, _ := ParseDoc([]byte(`{"mcp": [1, 2]}`))
	err := d.Set(entry, "mcp", "mempalace")
	if !errors.Is(err, ErrNotObject) || !strings.Contains(err.Error(), "line 1, column 9: mcp is an array, not an object") {
		t.Fatalf("err = %v, want one naming mcp", err)
	}
	if string(d.Bytes()) != `{"mcp": [1, 2]}` {
		t.Fatal("a failed Set changed the document")
	}
}

func TestParseErrorsNameLineAndColumn(t *testing.T) {
	_, err := ParseDoc([]byte("{\n  \"a\": 1\n  \"b\": 2\n}"))
	if err == nil || !strings.Contains(err.Error(), "line 3, column 3") {
		t.Fatalf("err = %v", err)
	}
	if _, err := ParseDoc([]byte(`[1]`)); err == nil {
		t.Fatal("an array document was accepted")
	}
}

func TestDeleteKeepsNeighboursAndCommaStyle(t *testing.T) {
	cases := []struct{ in, want string }{
		{"{\n  \"a\": 1,\n  \"m\": 2\n}", "{\n  \"a\": 1\n}"},
		{"{\n  \"a\": 1,\n  \"m\": 2,\n}", "{\n  \"a\": 1,\n}"},
		{"{\n  \"a\": 1, // about a\n  \"m\": 2,\n  \"b\": 3\n}", "{\n  \"a\": 1, // about a\n  \"b\": 3\n}"},
		{"{\n  \"m\": 2, // about m\n  \"b\": 3\n}", "{\n  \"b\": 3\n}"},
		{"{\"m\": 2}", "{}"},
	}
	for _, c := range cases {
		d, err := ParseDoc([]byte(c.in))
		if err != nil {
			t.Fatal(err)
		}
		ok, err := d.Delete("m")
		if err != nil || !ok {
			t.Fatalf("Delete(%q) = %v, %v", c.in, ok, err)
		}
		if got := string(d.Bytes()); got != c.want {
			t.Errorf("Delete from %q:\ngot  %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestDuplicatesAreReported(t *testing.T) {
	d, _ := ParseDoc([]byte(`{"mcp": {"mempalace": 1, "mempalace": 2}}`))
	if got := d.Duplicates("mcp", "mempalace"); got == nil || got.Path != "mcp.mempalace" {
		t.Fatalf("Duplicates = %v", got)
	} else if got.Error() != `line 1, column 26: "mcp.mempalace" is named twice` {
		t.Fatalf("message %q does not name the second occurrence's line and column", got.Error())
	}
	d, _ = ParseDoc([]byte(`{"mcp": {"mempalace": 1}, "x": 1, "x": 2}`))
	if got := d.Duplicates("mcp", "mempalace"); got != nil {
		t.Fatalf("a duplicate off the path was reported: %v", got)
	}
}

func TestFillMissing(t *testing.T) {
	live, _ := ParseDoc([]byte("{\n  \"a\": 1,\n  \"arr\": [1],\n  \"o\": {\"k\": false}\n}\n"))
	added, err := FillMissing(live, []byte(`{"a": 2, "arr": [1, 2, 3], "o": {"k": true, "n": 5}, "new": {"x": [1]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(added, ",") != "o.n,new" {
		t.Fatalf("added = %v", added)
	}
	var got map[string]any
	std, _ := hujson.Standardize(live.Bytes())
	json.Unmarshal(std, &got)
	want := map[string]any{"a": 1.0, "arr": []any{1.0}, "o": map[string]any{"k": false, "n": 5.0}, "new": map[string]any{"x": []any{1.0}}}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("merged = %s, want %s (live wins, arrays are leaves)", gb, wb)
	}
	again, _ := FillMissing(live, []byte(`{"a": 2, "o": {"n": 1}}`))
	if len(again) != 0 {
		t.Fatalf("second merge added %v", again)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
