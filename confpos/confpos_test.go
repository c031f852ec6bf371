package confpos

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestLineCol(t *testing.T) {
	src := []byte("ab\ncd\n")
	for off, want := range map[int][2]int{0: {1, 1}, 1: {1, 2}, 2: {1, 3}, 3: {2, 1}, 4: {2, 2}, 6: {3, 1}, 99: {3, 1}, -1: {1, 1}} {
		if l, c := LineCol(src, off); l != want[0] || c != want[1] {
			t.Errorf("offset %d: %d:%d, want %d:%d", off, l, c, want[0], want[1])
		}
	}
}

// JSONC: hujson's own line and column are kept, and a key is found past
// comments and trailing commas.
func TestDecodeJSONC(t *testing.T) {
	type dev struct {
		ID string `json:"id"`
		KG string `json:"kg,omitempty"`
	}
	type cfg struct {
		Devices []dev `json:"devices"`
	}
	for src, want := range map[string]string{
		"{\n // c\n \"devices\": [{\"id\": \"a\",},\n  {\"id\": \"b\", \"kag\": \"read\"},],\n}\n": `f.jsonc:4:15: unknown key "kag" in devices[1] (fix: did you mean "kg"?`,
		"{\n \"devices\": [{\"id\": \"a\"}\n  {\"id\": \"b\"}]\n}\n":                               `f.jsonc:3:3: invalid character '{' after array value (expecting ',' or ']') (fix: add the missing comma`,
		"{\"devices\": [{\"id\": \"a\", \"kg\": \"read\", \"kg\": \"admin\"}]}":                    `f.jsonc:1:40: "kg" is named twice in devices[0] (fix: keep one`,
		"{\"devices\": [{\"id\": 7}]}":                                                             `f.jsonc:1:21: devices[0].id is a number (7) (fix: make it a string`,
	} {
		var c cfg
		err := (JSON{JSONC: true, Strict: true}).DecodeJSON("f.jsonc", []byte(src), &c)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q:\n got %v\nwant %s...", src, err, want)
		}
	}
}

// A key is a field's only when written exactly (attack73 F1):
// encoding/json, which ignores case, took "Admin" for admin, a "KG" after
// "kg" for kg, a second "Devices" for the devices. Strict refuses such a
// key at its place with the key it may mean; otherwise it is ignored, as
// any unknown key is.
func TestAKeyInAnotherCaseIsNoFields(t *testing.T) {
	type dev struct {
		ID    string `json:"id"`
		KG    string `json:"kg,omitempty"`
		Admin bool   `json:"admin,omitempty"`
	}
	type cfg struct {
		Devices []dev          `json:"devices"`
		Wings   map[string]dev `json:"wings,omitempty"`
	}
	for src, want := range map[string]string{
		"{\"devices\": [{\"id\": \"a\", \"Admin\": true}]}":                                   `f.jsonc:1:26: unknown key "Admin" in devices[0] (fix: did you mean "admin"? A key is read exactly, case included`,
		"{\"devices\": [{\"id\": \"a\", \"kg\": \"write\",\n \"KG\": \"read\"}]}":             `f.jsonc:2:2: unknown key "KG" in devices[0] (fix: did you mean "kg"?`,
		"{\"devices\": [{\"id\": \"a\"}],\n \"Devices\": [{\"id\": \"b\", \"admin\": true}]}": `f.jsonc:2:2: unknown key "Devices" at the top level (fix: did you mean "devices"?`,
		"{\"wings\": {\"W\": {\"id\": \"a\", \"ID\": \"b\"}}}":                                `f.jsonc:1:29: unknown key "ID" in wings["W"] (fix: did you mean "id"?`,
		"{\"devices\": [{\"id\": \"a\", \"\u212Ag\": \"write\"}]}":                            `f.jsonc:1:26: unknown key "\u212ag" in devices[0] (fix: did you mean "kg"?`, // Kelvin sign: encoding/json folds it to k; shown as an escape (attack75 F1)
	} {
		var c cfg
		err := (JSON{JSONC: true, Strict: true}).DecodeJSON("f.jsonc", []byte(src), &c)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Strict %q:\n got %v (%+v)\nwant %s...", src, err, c, want)
		}
		c = cfg{}
		if err := (JSON{}).DecodeJSON("f.json", []byte(src), &c); err != nil || len(c.Devices) > 1 ||
			(len(c.Devices) == 1 && (c.Devices[0] != dev{ID: "a"} && c.Devices[0] != dev{ID: "a", KG: "write"})) || c.Wings["W"].ID != "" && c.Wings["W"].ID != "a" {
			t.Errorf("not Strict %q: %+v, %v; want the exact keys alone taken", src, c, err)
		}
	}
}

// An embedded struct's keys are the outer struct's, as encoding/json
// takes them (review25 F5): the exact-key check blanked them, so a
// lenient file dropped them silently and a strict one refused them.
func TestAnEmbeddedStructsKeysAreTaken(t *testing.T) {
	type base struct {
		ID string `json:"id"`
	}
	type cfg struct {
		base
		KG string `json:"kg"`
	}
	src := []byte(`{"id": "a", "kg": "read"}`)
	for _, o := range []JSON{{}, {JSONC: true, Strict: true}} {
		var c cfg
		if err := o.DecodeJSON("f.jsonc", src, &c); err != nil || c != (cfg{base{"a"}, "read"}) {
			t.Errorf("%+v: %+v, %v; want id and kg taken", o, c, err)
		}
	}
}

// NoTrailingCommas: comments are taken, the first trailing comma (in an
// object or an array, at any depth) is placed at the comma.
func TestDecodeJSONCNoTrailingCommas(t *testing.T) {
	o := JSON{JSONC: true, NoTrailingCommas: true}
	if err := o.DecodeJSON("s.json", []byte("{ // c\n \"a\": [1, 2] /* d */\n}\n"), new(any)); err != nil {
		t.Errorf("comments refused: %v", err)
	}
	for src, want := range map[string]string{
		"{\"a\": {\"b\": [1, 2 /* c */ ,]}}": `s.json:1:27: a comma before "]" (fix: remove the comma: s.json may hold comments but no trailing commas)`,
		"{\n \"a\": 1, // c\n}\n":            `s.json:2:8: a comma before "}" (fix: remove the comma`,
	} {
		if err := o.DecodeJSON("s.json", []byte(src), new(any)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q:\n got %v\nwant %s...", src, err, want)
		}
	}
}

// A misspelt name is taken for the known one within two edits, case and
// a swap of neighbours counted as one; a name so short that anything is
// near is taken for none.
func TestNearest(t *testing.T) {
	known := []string{"MEMPALACE_REMOTE_URL", "kg", "devices"}
	for name, want := range map[string]string{"MEMPALACE_REMOTE_ULR": "MEMPALACE_REMOTE_URL", "mempalace_remote_url": "MEMPALACE_REMOTE_URL", "kag": "kg", "device": "devices", "x": "", "wings": ""} {
		if got := Nearest(name, known); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", name, got, want)
		}
	}
}

// A column counts characters, as an editor shows it (attack27: a mistake
// after "név": "ééééé" was placed at column 32 where the editor shows 26).
func TestColumnCountsCharacters(t *testing.T) {
	src := []byte("{\n  \"név\": \"ééééé\" x\n}\n")
	off := bytes.IndexByte(src, 'x')
	if line, col := LineCol(src, off); line != 2 || col != 18 {
		t.Errorf("LineCol = %d:%d, want 2:18", line, col)
	}
	var v map[string]any
	err := JSON{}.DecodeJSON("f.json", src, &v)
	var pe *Error
	if !errors.As(err, &pe) || pe.Line != 2 || pe.Col != 18 {
		t.Errorf("DecodeJSON: %v, want f.json:2:18", err)
	}
}

// A \u escape of a printable ASCII character, in a key or a string, is
// refused where the file is strict, at the backslash, with the character
// to write (attack75 F1: "\u0061dmin": true made an admin and "\u002a"
// granted every wing, unseen by a reader or grep). The escapes JSON needs
// (a control character, \" and \\), non-ASCII ones and < > & (Go's
// encoder writes them so) are kept; a file that is not strict takes any.
func TestAnEscapedPlainCharacterIsRefused(t *testing.T) {
	type dev struct {
		ID    string   `json:"id"`
		Read  []string `json:"read,omitempty"`
		Admin bool     `json:"admin,omitempty"`
	}
	type cfg struct {
		Devices []dev `json:"devices"`
	}
	for src, want := range map[string]string{
		`{"devices": [{"id": "a", "\u0061dmin": true}]}`:              `f.jsonc:1:27: "admin" is written with \u0061 for "a" (fix: write the character itself, "admin"`,
		"{\"devices\": [{\"id\": \"a\",\n \"read\": [\"\\u002A\"]}]}": `f.jsonc:2:12: "*" is written with \u002A for "*" (fix: write the character itself, "*"`,
		`{"devices": [{"id": "a\u0022"}]}`:                            `f.jsonc:1:23: "a\"" is written with \u0022 for "\"" (fix: write it as \", the escape JSON has for it)`,
		`{"d\u0065vices": []}`:                                        `f.jsonc:1:4: "devices" is written with \u0065 for "e"`,
	} {
		var c cfg
		err := (JSON{JSONC: true, Strict: true}).DecodeJSON("f.jsonc", []byte(src), &c)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Strict %q:\n got %v (%+v)\nwant %s...", src, err, c, want)
		}
		if err := (JSON{}).DecodeJSON("f.json", []byte(src), &c); err != nil {
			t.Errorf("not Strict %q: %v", src, err)
		}
	}
	for _, id := range []string{`a\\u0061`, `\n\t\"\\\u0000\u001f\u007f`, `caf\u00e9 \ud83d\ude00`, `R\u0026D \u003cx\u003e`} {
		var c cfg
		if err := (JSON{JSONC: true, Strict: true}).DecodeJSON("f.jsonc", []byte(`{"devices": [{"id": "`+id+`"}]}`), &c); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// JSON nested deeper than encoding/json reads (a gateway's or an edge's
// config) is refused with a fix for that, not "a missing or extra comma".
// attack77 F3.
func TestTooDeepHasItsOwnFix(t *testing.T) {
	src := `{"a": ` + strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) + "}"
	for _, o := range []JSON{{}, {JSONC: true}} {
		err := o.DecodeJSON("f.json", []byte(src), new(any))
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Fix, "10,000 levels") || strings.Contains(pe.Fix, "comma") {
			t.Errorf("JSONC %v: %v, want a fix that says how deep it may nest", o.JSONC, err)
		}
	}
}
