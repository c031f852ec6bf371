package render

import (
	"encoding/json"
	"github.com/joakimp/devbox-config/redact"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/tailscale/hujson"
	"go.yaml.in/yaml/v4"

	"github.com/joakimp/devbox-config/harness"
)

// maskSeeds are configs with values in every shape the formats allow:
// quoted, bare, on the next line, over several lines, in lists and inline
// maps, next to comments.
var maskSeeds = map[harness.Format][]string{
	harness.JSONC: {
		`{"a": "Sfirst", "b": ["Ssecond", 1, true, null], "c": {"d": "Sthird"}} // Sfourth` + "\n",
		"{\n  \"auth\":\n    \"Bearer Snextline\",\n  /* Sblock\n Sblock2 */ \"x\": \"Sesc\\\"aped\"\n}\n",
		"{\"u\": \"postgres://u:Spass@h/db\", \"r\": \"${VAR}\", \"args\": [\"--token\", \"Sargtoken\", \"--password=Sargpass\"]}",
	},
	harness.TOML: {
		"a = \"Sfirst\"\nb = 'Ssecond'\n[t]\nc = [\"Sthird\", 1,\n  'Sfourth'] # Scomment\nd = { e = \"Sfifth\", f = 2 }\n",
		"k = \"\"\"\nSmulti\nSmulti2\"\"\"\nl = '''\nSlit\n'''\nm = \"Sx \\\" Sy\"\n",
		"[a.\"b c\"]\nx = 1979-05-27T07:32:00Z\ny = \"Sdated\"\n[[arr]]\nz = \"Sarr\"\n",
	},
	harness.YAML: {
		"a: Sfirst\nb:\n  - Ssecond\n  - c: Sthird # Scomment\nd: {e: Sfourth, f: [Sfifth, 1]}\n",
		"k: >\n  Sfolded\n  Sfolded2\n\n  Sfolded3\nl: |-\n    Sliteral\nm: next\nn:\n  Snextline\n",
		"q: \"Squoted\n  Squoted2\"\nr: 'Ssingle''s\n  Ssingle2'\ns: !!str Stagged\nt: &anchor Sanchored\nu: *anchor\n",
		"- name: x\n  script: |\n    Sscript\n  other: Sother\n- |\n  Sseqblock\n",
	},
}

// TestMaskHidesEveryValue: after mask, no word of any string value the
// format's own parser reads from a seed is left, the lines are as many,
// and the keys are all there.
func TestMaskHidesEveryValue(t *testing.T) {
	for format, seeds := range maskSeeds {
		for _, seed := range seeds {
			if !checkMask(t, format, seed) {
				t.Errorf("%s seed does not parse:\n%s", format, seed)
			}
		}
	}
}

func FuzzMaskYAML(f *testing.F) { fuzzMask(f, harness.YAML) }
func FuzzMaskTOML(f *testing.F) { fuzzMask(f, harness.TOML) }
func FuzzMaskJSON(f *testing.F) { fuzzMask(f, harness.JSONC) }

func fuzzMask(f *testing.F, format harness.Format) {
	for _, s := range maskSeeds[format] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) { checkMask(t, format, src) })
}

// checkMask checks mask on src if the format's parser reads src (ok).
func checkMask(t *testing.T, format harness.Format, src string) (ok bool) {
	t.Helper()
	if !utf8.ValidString(src) {
		return false // printed as it is read, not as the parser decodes it
	}
	var v any
	switch format {
	case harness.TOML:
		if toml.Unmarshal([]byte(src), &v) != nil {
			return false
		}
	case harness.YAML:
		if yaml.Unmarshal([]byte(src), &v) != nil {
			return false
		}
	default:
		b, err := hujson.Standardize([]byte(src))
		if err != nil || json.Unmarshal(b, &v) != nil {
			return false
		}
	}
	var keys, values []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			values = append(values, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				keys = append(keys, k)
				walk(e)
			}
		}
	}
	walk(v)
	got := string(mask(format, []byte(src), nil))
	if strings.Count(got, "\n") != strings.Count(src, "\n") {
		t.Fatalf("%s: %d lines masked, %d before:\n%s\n---\n%s", format, strings.Count(got, "\n"), strings.Count(src, "\n"), src, got)
	}
	allKeys := strings.Join(keys, "\n")
	for _, val := range values {
		if reference.MatchString(val) {
			continue
		}
		for _, w := range strings.FieldsFunc(val, func(r rune) bool { return strings.ContainsRune(" \t\r\n\"'=:@/-", r) }) {
			if len(w) >= 4 && !strings.Contains(allKeys, w) && strings.Contains(got, w) {
				t.Fatalf("%s: the value %q is printed:\n%s\n---\n%s", format, val, src, got)
			}
		}
	}
	for _, k := range keys {
		if strings.ContainsAny(k, "\"'\\ \t\n#:.") || k == "" {
			continue // a key printed in another form than it is read
		}
		if !strings.Contains(got, k) {
			t.Fatalf("%s: the key %q is not printed:\n%s\n---\n%s", format, k, src, got)
		}
	}
	return true
}

// A value shaped like a variable reference prints only in the forms the
// harnesses resolve, with a conventional (upper-case) name: a secret that
// starts with $ (a password "$S3cretpass") or names a lower-case variable
// is hidden like any other value.
func TestMaskShowsOnlyConventionalReferences(t *testing.T) {
	shown := []string{"${MEMPALACE_REMOTE_TOKEN}", "{env:TOKEN_2}", "${env:_X}", "$HOME", "Bearer ${TOK}", "Bearer {env:TOK}", "Bearer $TOK"}
	hidden := []string{"$S04secretafterdollar", "$S3cretpass", "${lower}", "{env:mixedCase}", "${env:Pass}", "$_abc", "Bearer $tok", "$1PASS", "${A-B}"}
	for format, line := range map[harness.Format]string{harness.JSONC: `{"k": %q}`, harness.TOML: "k = %q", harness.YAML: "k: %q"} {
		for _, v := range append(shown, hidden...) {
			src := strings.Replace(line, "%q", strconv.Quote(v), 1) + "\n"
			got := string(mask(format, []byte(src), nil))
			if want := slices.Contains(shown, v); strings.Contains(got, v) != want {
				t.Errorf("%s: %s masks as %s (want the value printed: %v)", format, src, got, want)
			}
		}
	}
}

// The diff takes out a token as short as redact.MinTokenInText, the bound
// ladder's URL check uses too, and leaves a shorter one, which ordinary
// text holds by chance.
func TestDiffRedactsTokensFromTheSharedBound(t *testing.T) {
	long := strings.Repeat("k", redact.MinTokenInText)
	short := long[1:]
	for tok, want := range map[string]bool{long: true, short: false} {
		c := Change{Path: "/h/" + tok + "/c.json", Old: []byte("{}\n"), New: []byte("{\"a\": 1}\n"), format: harness.JSON}
		if got := !strings.Contains(c.Diff(tok), tok); got != want {
			t.Errorf("token of %d characters: redacted %v, want %v", len(tok), got, want)
		}
	}
}
