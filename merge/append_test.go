package merge

import (
	"fmt"
	"testing"
)

// Append puts a new key after the last member, keeping every byte before
// it: a comment on the last member's line stays there, trailing-comma
// style and one-line objects are kept.
func TestAppendGoesLast(t *testing.T) {
	cases := []struct{ in, want string }{
		{"{\n  \"a\": 1\n}\n", "{\n  \"a\": 1,\n  \"z\": true\n}\n"},
		{"{\n  \"a\": 1 // mine\n}\n", "{\n  \"a\": 1, // mine\n  \"z\": true\n}\n"},
		{"{\n  \"a\": 1,\n}\n", "{\n  \"a\": 1,\n  \"z\": true,\n}\n"},
		{`{"a": 1}`, `{"a": 1, "z": true}`},
		{"{}", "{\n  \"z\": true\n}"},
	}
	for _, c := range cases {
		d, err := ParseDoc([]byte(c.in))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Append([]byte("true"), "z"); err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got := string(d.Bytes()); got != c.want {
			t.Errorf("Append to %q:\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

// Several keys missing from one object are added at its end, in the
// template's order (not at the front, not reversed), the user's keys first
// and byte for byte.
func TestFillMissingAppendsInTemplateOrder(t *testing.T) {
	live := "{\n  // mine\n  \"theme\": \"dark\",\n  \"nested\": {\n    \"keep\": 1\n  }\n}\n"
	tmpl := `{"alpha": 1, "theme": "light", "zulu": 2, "mid": {"x": 1}, "nested": {"b": 1, "a": 2, "keep": 9}}`
	want := "{\n  // mine\n  \"theme\": \"dark\",\n  \"nested\": {\n    \"keep\": 1,\n    \"b\": 1,\n    \"a\": 2\n  },\n  \"alpha\": 1,\n  \"zulu\": 2,\n  \"mid\": {\n    \"x\": 1\n  }\n}\n"
	d, err := ParseDoc([]byte(live))
	if err != nil {
		t.Fatal(err)
	}
	added, err := FillMissing(d, []byte(tmpl))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(d.Bytes()); got != want {
		t.Errorf("FillMissing:\n got %q\nwant %q", got, want)
	}
	if fmt.Sprint(added) != "[alpha zulu mid nested.b nested.a]" {
		t.Errorf("added %v", added)
	}
}
