package merge

import (
	"bytes"
	"testing"

	"github.com/tailscale/hujson"
)

// FuzzSet checks the splice on arbitrary JSONC: the output parses, the
// managed value is what was set, every byte outside it is unchanged, and a
// second Set of the same value changes nothing.
func FuzzSet(f *testing.F) {
	for _, s := range []string{
		"{}", "", "{\"a\":1}", "{\n  // c\n  \"mcp\": {\"x\": 1,},\n}\n",
		"{\r\n\t\"mcp\": {\r\n\t\t\"mempalace\": null\r\n\t}\r\n}", "{ /* a */ \"mcp\" /* b */ : /* c */ { } }",
		"{\"$schema\": \"s\"}", "{\"mcp\": {\"mempalace\": {\"type\": \"remote\"}, // t\n}}",
	} {
		f.Add([]byte(s))
	}
	for _, s := range commentHeavySeeds {
		f.Add([]byte(s))
	}
	value := []byte(`{"type":"local","command":["mempalace-mcp"],"enabled":true}`)
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := hujson.Parse(in); err != nil && len(bytes.TrimSpace(in)) > 0 {
			// What only ParseDoc accepts (a byte order mark, a final //
			// comment without newline) is FuzzRoundTrip's; this target
			// checks offsets in hujson's own terms.
			return
		}
		d, err := ParseDoc(in)
		if err != nil {
			return
		}
		// Only documents where mcp is absent or an object can take the value.
		if ok, err := d.Has("mcp", "mempalace"); err != nil {
			return
		} else if ok && d.Duplicates("mcp", "mempalace") != nil {
			return
		}
		before, _ := d.Get("mcp", "mempalace")
		orig := d.Bytes()
		if err := d.Set(value, "mcp", "mempalace"); err != nil {
			return // e.g. mcp is not an object: Set refused, checked below
		}
		out := d.Bytes()
		v, err := hujson.Parse(out)
		if err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, out)
		}
		got := v.Find("/mcp/mempalace")
		if got == nil {
			t.Fatalf("value missing after Set:\n%s", out)
		}
		c := got.Clone()
		c.BeforeExtra, c.AfterExtra = nil, nil
		c.Standardize()
		if !jsonEqualBytes(c.Pack(), value) {
			t.Fatalf("value = %s", c.Pack())
		}
		if before != nil && len(bytes.TrimSpace(orig)) > 0 {
			// Replacement: everything before and after the value's bytes is
			// the original's.
			ov, _ := hujson.Parse(orig)
			old := ov.Find("/mcp/mempalace")
			if !bytes.Equal(out[:got.StartOffset], orig[:old.StartOffset]) || !bytes.Equal(out[got.EndOffset:], orig[old.EndOffset:]) {
				t.Fatalf("bytes outside the value changed:\n%q\n%q", orig, out)
			}
		}
		d2, err := ParseDoc(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := d2.Set(value, "mcp", "mempalace"); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d2.Bytes(), out) {
			t.Fatalf("second Set changed the bytes:\n%q\n%q", out, d2.Bytes())
		}
		// Delete takes the member out and leaves a parseable document.
		if ok, err := d2.Delete("mcp", "mempalace"); err != nil || !ok {
			t.Fatalf("Delete = %v, %v", ok, err)
		}
		if _, err := hujson.Parse(d2.Bytes()); err != nil {
			t.Fatalf("output of Delete does not parse: %v\n%s", err, d2.Bytes())
		}
		if has, _ := d2.Has("mcp", "mempalace"); has {
			t.Fatalf("member still present after Delete:\n%s", d2.Bytes())
		}
	})
}

func jsonEqualBytes(a, b []byte) bool {
	ca, err1 := hujson.Minimize(a)
	cb, err2 := hujson.Minimize(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}
