package merge

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSkeleton: a document parsed as a skeleton behaves exactly as the
// whole document: it refuses what ParseDoc refuses, and setting, reading
// and removing the entry (and "$schema") give the same bytes.
func FuzzSkeleton(f *testing.F) {
	for _, s := range commentHeavySeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"agent": {"a": [1, 2.5e3, -0, "x\u00e9\n", true, false, null,], "b": {}}, "mcp": {}}`,
		`{"big": "` + strings.Repeat("x", 100) + `", "mcp": {"o": 1}}`,
		`{"bad": {"a": 01}, "mcp": {}}`, `{"bad": [1 2], "mcp": {}}`, `{"bad": "\x", "x": 1}`,
		`{"deep": ` + strings.Repeat(`{"a":[`, 50) + "1" + strings.Repeat("]}", 50) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, err1 := ParseDoc(in)
		skel, err2 := parseFocused(in, 0, []string{"mcp", "$schema"})
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("ParseDoc err %v, skeleton err %v:\n%q", err1, err2, in)
		}
		if err1 != nil {
			return
		}
		if !bytes.Equal(whole.Bytes(), skel.Bytes()) {
			t.Fatalf("Bytes differ:\n%q\n%q", whole.Bytes(), skel.Bytes())
		}
		for _, d := range []*Doc{whole, skel} {
			d.Set([]byte(`"https://opencode.ai/config.json"`), "$schema")
			d.Set(solitaryEntry, "mcp", "mempalace")
		}
		if !bytes.Equal(whole.Bytes(), skel.Bytes()) {
			t.Fatalf("after Set:\n%q\n%q", whole.Bytes(), skel.Bytes())
		}
		g1, e1 := whole.Get("mcp", "mempalace")
		g2, e2 := skel.Get("mcp", "mempalace")
		if !bytes.Equal(g1, g2) || (e1 == nil) != (e2 == nil) {
			t.Fatalf("Get: %s %v / %s %v", g1, e1, g2, e2)
		}
		if (whole.Duplicates("mcp", "mempalace") == nil) != (skel.Duplicates("mcp", "mempalace") == nil) {
			t.Fatal("Duplicates differ")
		}
		whole.Delete("mcp", "mempalace")
		skel.Delete("mcp", "mempalace")
		if !bytes.Equal(whole.Bytes(), skel.Bytes()) {
			t.Fatalf("after Delete:\n%q\n%q", whole.Bytes(), skel.Bytes())
		}
		// A path outside the focus still works (by expanding).
		a1, _ := whole.Get("agent")
		if raw, ok := skel.Skipped("agent"); ok && !bytes.Equal(raw, a1) {
			t.Fatalf("Skipped(agent) is not what Get reads: %s / %s", raw, a1)
		}
		a2, _ := skel.Get("agent")
		if !bytes.Equal(a1, a2) {
			t.Fatalf("Get(agent): %s / %s", a1, a2)
		}
	})
}

// A large document really is parsed as a skeleton (else the benchmark
// measures nothing new) and still round-trips byte for byte.
func TestSkeletonUsedForLargeDocuments(t *testing.T) {
	var b strings.Builder
	b.WriteString("{\n  // big\n  \"agent\": {")
	for b.Len() < skeletonMin {
		b.WriteString("\"k\": [1, 2, 3], /* c */ ")
	}
	b.WriteString("},\n  \"mcp\": {\n    \"o\": {}\n  }\n}\n")
	in := []byte(b.String())
	d, err := ParseDocFocused(in, "mcp", "$schema")
	if err != nil {
		t.Fatal(err)
	}
	if d.spans == nil || len(d.src) > 1000 {
		t.Fatalf("no skeleton: %d bytes parsed", len(d.src))
	}
	if !bytes.Equal(d.Bytes(), in) {
		t.Fatal("skeleton Bytes differ from the input")
	}
	if err := d.Set(solitaryEntry, "mcp", "mempalace"); err != nil {
		t.Fatal(err)
	}
	if d.spans == nil {
		t.Fatal("an edit under the focus expanded the skeleton")
	}
	full, _ := ParseDoc(in)
	full.Set(solitaryEntry, "mcp", "mempalace")
	if !bytes.Equal(d.Bytes(), full.Bytes()) {
		t.Fatal("skeleton edit differs from the whole document's")
	}
}

// Skipped hands out a top-level value the skeleton left out, as written,
// without expanding the document, only when it is strict JSON.
func TestSkipped(t *testing.T) {
	big := `{"h": "` + strings.Repeat("x", skeletonMin) + `"}`
	for _, c := range []struct {
		name, doc string
		want      string // "": not handed out
	}{
		{"strict", `{"mcp": {}, "projects": ` + big + `}`, big},
		{"comments around it", "{\"mcp\": {}, // c\n\"projects\": /* c */ " + big + " // c\n}", big},
		{"a comment inside", `{"mcp": {}, "projects": {"a": 1, /* c */ "h": "` + strings.Repeat("x", skeletonMin) + `"}}`, ""},
		{"a trailing comma inside", `{"mcp": {}, "projects": {"a": [1,], "h": "` + strings.Repeat("x", skeletonMin) + `"}}`, ""},
		{"twice", `{"mcp": {}, "projects": ` + big + `, "projects": ` + big + `}`, ""},
		{"in the focus", `{"mcp": ` + big + `}`, ""},
		{"small", `{"mcp": {}, "projects": {"h": "` + strings.Repeat("x", 100) + `"}}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDocFocused([]byte(c.doc), "mcp")
			if err != nil {
				t.Fatal(err)
			}
			key := "projects"
			if c.name == "in the focus" {
				key = "mcp"
			}
			raw, ok := d.Skipped(key)
			if ok != (c.want != "") || string(raw) != c.want {
				t.Fatalf("Skipped = %.40q, %v; want %.40q", raw, ok, c.want)
			}
			if ok && d.spans == nil {
				t.Fatal("Skipped expanded the skeleton")
			}
		})
	}
}

// FuzzStrictJSON: StrictJSON says what encoding/json says of every input
// it can read (under 10,000 levels), and accepts what is deeper only as
// valid JSON once the depth is taken away; CommentedJSON says the same of
// an input with no comment.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[1, 2]`, `{"a": [1,]}`, `{"a": 1} // c`, `"\u00e9"`, "\"\x01\"", `01`, `1e5`, `-0.5E+3`, `{"a":1,"a":2}`, " \t\n{} ", `{"a" 1}`, `[tru]`, "\xef\xbb\xbf{}", `"\ud800"`, `/* */ 1`, `nul`, `1 2`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !utf8.Valid(in) {
			return // encoding/json takes bad UTF-8 in a string, the scanner (as hujson) does not: stricter, refused as before
		}
		if got, want := StrictJSON(in), json.Valid(in); got != want {
			t.Fatalf("StrictJSON %v, encoding/json %v: %q", got, want, in)
		}
		if !bytes.Contains(in, []byte("/")) && CommentedJSON(in) != StrictJSON(in) {
			t.Fatalf("without a comment, CommentedJSON %v, StrictJSON %v: %q", CommentedJSON(in), StrictJSON(in), in)
		}
		wrap := func(n int) []byte {
			return append(append([]byte(strings.Repeat("[", n)), in...), strings.Repeat("]", n)...)
		}
		if got, want := StrictJSON(wrap(10_001)), json.Valid(wrap(1)); got != want {
			t.Fatalf("in 10,001 arrays: StrictJSON %v, encoding/json in one %v: %q", got, want, in)
		}
	})
}
