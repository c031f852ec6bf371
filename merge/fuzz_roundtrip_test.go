package merge

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tailscale/hujson"
)

// The three rungs' entries for opencode, as templates/ renders them.
var (
	solitaryEntry = []byte(`{"type": "local", "command": ["mempalace-mcp"], "enabled": true}`)
	remoteEntry   = []byte(`{"type": "remote", "url": "https://palace.example.org/mcp", "headers": {"Authorization": "Bearer {env:MEMPALACE_REMOTE_TOKEN}"}, "oauth": false, "enabled": true}`)
	edgeEntry     = []byte(`{"type": "local", "command": ["devbox-config", "edge"], "environment": {"MEMPALACE_EDGE_HARNESS": "opencode"}, "enabled": true}`)
)

// commentHeavySeeds are JSONC files of the kind people keep: block
// comments across the head, comments beside every member, one-line
// objects with comments before neighbours, CRLF, trailing commas.
var commentHeavySeeds = []string{
	"{ /* my settings,\n     synced */\n  \"theme\": \"nord\"\n}\n",
	"{\n  \"mcp\": { /* servers\n  here */ }\n}\n",
	"{\n  \"mcp\": { /* a\n     b */\n    \"other\": {\"type\": \"local\"} // o\n  }\n}\n",
	"{\"mcp\": { /* keep me */ \"other\": {\"type\": \"local\"} }}",
	"{ // top\n  /* lead */ \"$schema\": \"s\", // s\n  /* m */ \"mcp\": /* v */ { // brace\n    // before other\n    \"other\": 1, // after other\n    /* x */ \"x\": 2 /* y */, // z\n  }, // after mcp\n  \"t\": [1, /* 2 */ 3,], // t\n} // end",
	"\ufeff{\r\n\t// crlf\r\n\t\"mcp\": {\r\n\t\t/* c */ \"a\": true,\r\n\t},\r\n}\r\n",
	"{\"a\":1,/*c*/\"mcp\":{/*d*/\"b\":2/*e*/}/*f*/}// g",
	"{\n  \"mcp\": {\n    \"mempalace\": { /* old */ \"type\": \"local\", \"command\": [\"x\"] }, // ours\n    \"z\": {} /* z */\n  }\n}\n",
	"{\n  \"$schema\": \"s\" /* only schema\n  across lines */\n}\n",
	"{   \n  \"mcp\": {   \n    \"o\": 1   \n  }   \n}   \n",
	"{\n  /* a */ /* b\n */ // c\n  \"mcp\": {}, /* d\n */ \"e\": 1\n}\n",
	"{\"mcp\":{\"mempalace\":{\"type\":\"remote\",\"url\":\"u\"}, /* n */ \"n\":1}}",
}

// FuzzRoundTrip is issue 15's round trip on comment-heavy JSONC: set the
// entry for solitary, then remote, edge, solitary and remote again.
//   - Every result parses and the entry is in the parsed value (not in a
//     comment), with every comment of the input still in the file.
//   - From the first rendition on, every byte outside the entry is
//     identical, and coming back to a rung gives back its exact bytes.
//   - Removing a freshly inserted entry from a non-empty object gives back
//     the input exactly (a neighbour's comment stays with the neighbour).
func FuzzRoundTrip(f *testing.F) {
	for _, s := range commentHeavySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := ParseDoc(in)
		if err != nil {
			return
		}
		if _, err := d.Get("mcp", "mempalace"); err != nil || d.Duplicates("mcp", "mempalace") != nil {
			return // refused before any edit: a wrong type or a duplicate
		}
		had, _ := d.Has("mcp", "mempalace")
		mcpHad, _ := d.Has("mcp")
		parentEmpty := false
		if mcpHad {
			m, _ := d.Get("mcp")
			parentEmpty = isEmptyObject(m)
		} else {
			parentEmpty = len(d.tree().Value.(*hujson.Object).Members) == 0
		}

		var renditions [][]byte
		for i, e := range [][]byte{solitaryEntry, remoteEntry, edgeEntry, solitaryEntry, remoteEntry} {
			if err := d.Set(e, "mcp", "mempalace"); err != nil {
				t.Fatalf("rung %d: Set: %v\n%q", i, err, d.Bytes())
			}
			out := d.Bytes()
			checkEntry(t, out, e)
			checkTreeIsParse(t, d)
			for _, c := range comments(string(in)) {
				if !had && !strings.Contains(string(out), c) {
					t.Fatalf("rung %d: comment %q lost:\n%q\n%q", i, c, in, out)
				}
			}
			renditions = append(renditions, out)
		}
		first := renditions[0]
		for i, out := range renditions[1:] {
			if !sameOutside(first, out) {
				t.Fatalf("rung %d: bytes outside the entry changed:\n%q\n%q", i+1, first, out)
			}
		}
		if !bytes.Equal(renditions[0], renditions[3]) || !bytes.Equal(renditions[1], renditions[4]) {
			t.Fatalf("coming back to a rung did not give back its bytes:\n%q\n%q", renditions[0], renditions[3])
		}

		if had || parentEmpty {
			return
		}
		d, _ = ParseDoc(in)
		if err := d.Set(solitaryEntry, "mcp", "mempalace"); err != nil {
			t.Fatal(err)
		}
		if ok, err := d.Delete("mcp", "mempalace"); !ok || err != nil {
			t.Fatalf("Delete = %v, %v", ok, err)
		}
		if !mcpHad {
			d.Delete("mcp")
		}
		if got := d.Bytes(); !bytes.Equal(got, in) {
			t.Fatalf("insert then remove changed the file:\n%q\n%q", in, got)
		}
	})
}

func isEmptyObject(std []byte) bool {
	v, err := hujson.Parse(std)
	if err != nil {
		return false
	}
	o, ok := v.Value.(*hujson.Object)
	return ok && len(o.Members) == 0
}

// checkEntry: out parses, and its standard form holds entry at
// mcp.mempalace (an entry spliced into a comment would vanish there).
func checkEntry(t *testing.T, out, entry []byte) {
	t.Helper()
	body := bytes.TrimPrefix(out, utf8BOM)
	std, err := hujson.Standardize(bytes.Clone(body))
	if err != nil {
		// a final // comment without newline: what ParseDoc accepts
		if std, err = hujson.Standardize(append(bytes.Clone(body), '\n')); err != nil {
			t.Fatalf("result does not parse: %v\n%q", err, out)
		}
	}
	v, _ := hujson.Parse(std)
	got := v.Find("/mcp/mempalace")
	if got == nil {
		t.Fatalf("entry not in the parsed result:\n%q", out)
	}
	c := got.Clone()
	c.BeforeExtra, c.AfterExtra = nil, nil
	if !jsonEqualBytes(c.Pack(), entry) {
		t.Fatalf("entry = %s, want %s", c.Pack(), entry)
	}
}

// sameOutside reports whether a and b differ only inside their
// mcp.mempalace values.
func sameOutside(a, b []byte) bool {
	sa, ea, ok1 := entrySpan(a)
	sb, eb, ok2 := entrySpan(b)
	return ok1 && ok2 && bytes.Equal(a[:sa], b[:sb]) && bytes.Equal(a[ea:], b[eb:])
}

func entrySpan(src []byte) (start, end int, ok bool) {
	d, err := ParseDoc(src)
	if err != nil {
		return 0, 0, false
	}
	v := d.tree().Find("/mcp/mempalace")
	if v == nil {
		return 0, 0, false
	}
	off := 0
	if d.bom {
		off = len(utf8BOM)
	}
	return v.StartOffset + off, v.EndOffset + off, true
}

// checkTreeIsParse: the tree a Doc keeps after an edit is exactly what
// parsing its bytes gives (same values, offsets and comments in the same
// places), so later edits see what a fresh parse would.
func checkTreeIsParse(t *testing.T, d *Doc) {
	t.Helper()
	fresh, err := hujson.Parse(bytes.Clone(d.src))
	if err != nil {
		t.Fatalf("src does not parse: %v", err)
	}
	var kept, parsed []*hujson.Value
	for v := range d.tree().All() {
		kept = append(kept, v)
	}
	for v := range fresh.All() {
		parsed = append(parsed, v)
	}
	if len(kept) != len(parsed) {
		t.Fatalf("kept tree has %d values, a parse %d", len(kept), len(parsed))
	}
	for i := range kept {
		a, b := kept[i], parsed[i]
		if a.StartOffset != b.StartOffset || a.EndOffset != b.EndOffset ||
			!bytes.Equal(a.BeforeExtra, b.BeforeExtra) || !bytes.Equal(a.AfterExtra, b.AfterExtra) ||
			(a.BeforeExtra == nil) != (b.BeforeExtra == nil) || (a.AfterExtra == nil) != (b.AfterExtra == nil) {
			t.Fatalf("value %d differs from a parse: [%d,%d) %q %q vs [%d,%d) %q %q\n%q", i,
				a.StartOffset, a.EndOffset, a.BeforeExtra, a.AfterExtra, b.StartOffset, b.EndOffset, b.BeforeExtra, b.AfterExtra, d.src)
		}
	}
}
