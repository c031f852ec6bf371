package merge

import "testing"

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
