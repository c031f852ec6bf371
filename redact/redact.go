package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Mark is what a secret is replaced with.
const Mark = "[redacted]"

// credential is a Bearer or Basic credential's value, its space raw or
// percent- or form-encoded.
var credential = regexp.MustCompile(`(?i)((?:bearer|basic)(?:\s+|%20|\+))[^\s"',;&]+`)

// MinTokenInText is the shortest token looked for inside other text (a
// URL, a diff): a shorter one would match ordinary text that never held
// it. Render's diff and ladder's URL check use it.
const MinTokenInText = 8

// minCore is the fewest base64 characters looked for: fewer would match
// text that never held the secret.
const minCore = 8

// wrapped is a run of base64 over several lines (MIME's 76 columns).
var wrapped = regexp.MustCompile(`[A-Za-z0-9+/=_-]+(?:\r?\n[A-Za-z0-9+/=_-]+)+`)

// Secret is text with every Bearer or Basic credential's value, and
// secret replaced with Mark in these forms: raw (any case); each byte as
// itself, percent-encoded once or twice (%2B, %252B; a space also as + or
// %20) or an HTML numeric entity (&#43;, &#x2b;); hex (either case); or
// base64 (standard or URL alphabet, padded or not, at any offset of what
// was encoded: the whole run of base64 holding it, over line breaks as
// MIME wraps it). Not covered: other encodings (hex with separators,
// base32, named HTML entities, escapes of a language), the secret
// encrypted, compressed or cut into pieces. An empty secret takes out
// only credentials.
func Secret(text, secret string) string {
	return Token(credential.ReplaceAllString(text, "${1}"+Mark), secret)
}

// Token is Secret without the credentials: secret alone, in the same
// forms, for text that quotes a user's file (a parse error), where
// "basic" is an English word ("basic strings cannot have new lines").
func Token(text, secret string) string {
	if secret == "" || text == "" {
		return text
	}
	text = replaceEncoded(replaceEncoded(text, secret), hex.EncodeToString([]byte(secret)))
	var cores []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for k := 0; k < 3 && k < len(secret); k++ {
			// Encoded from an offset, the secret's bytes from its k-th on
			// fall on whole groups: their encoding, but the last partial
			// group's, is in the text whatever came before.
			t := secret[k:]
			if core := enc.EncodeToString([]byte(t[:len(t)/3*3])); len(core) >= minCore {
				cores = append(cores, core)
			}
		}
	}
	if strings.Contains(text, "\n") {
		text = wrapped.ReplaceAllStringFunc(text, func(run string) string {
			joined := strings.NewReplacer("\r", "", "\n", "").Replace(run)
			for _, core := range cores {
				if strings.Contains(joined, core) {
					return Mark
				}
			}
			return run
		})
	}
	for _, core := range cores {
		text = replaceRun(text, core)
	}
	return text
}

// replaceEncoded replaces secret, each of its bytes as itself (ASCII case
// ignored), percent-encoded once or twice or an HTML numeric entity, and
// a space also as +.
func replaceEncoded(text, secret string) string {
	var out strings.Builder
	last := 0
	for i := 0; i < len(text); {
		n := matchEncoded(text[i:], secret)
		if n == 0 {
			i++
			continue
		}
		out.WriteString(text[last:i])
		out.WriteString(Mark)
		i += n
		last = i
	}
	if last == 0 {
		return text
	}
	out.WriteString(text[last:])
	return out.String()
}

// matchEncoded is the length of secret's encoding at the start of text,
// 0 if it does not start there.
func matchEncoded(text, secret string) int {
	i := 0
	for j := 0; j < len(secret); j++ {
		c := secret[j]
		switch {
		case i >= len(text):
			return 0
		case text[i] == '%' && hexAt(text[i+1:]) == int(c):
			i += 3
		case strings.HasPrefix(text[i:], "%25") && hexAt(text[i+3:]) == int(c):
			i += 5
		case entity(text[i:], c) > 0:
			i += entity(text[i:], c)
		case c == ' ' && text[i] == '+', lower(text[i]) == lower(c):
			i++
		default:
			return 0
		}
	}
	return i
}

// hexAt is the byte two hex digits at the start of t stand for, -1 if
// t does not start with two.
func hexAt(t string) int {
	if len(t) < 2 || unhex(t[0]) < 0 || unhex(t[1]) < 0 {
		return -1
	}
	return unhex(t[0])<<4 | unhex(t[1])
}

// entity is the length of an HTML numeric entity for c (&#43;, &#x2b;)
// at the start of t, 0 if none.
func entity(t string, c byte) int {
	j := strings.IndexByte(t, ';')
	if !strings.HasPrefix(t, "&#") || j < 3 || j > 8 {
		return 0
	}
	digits, base := t[2:j], 10
	if digits[0]|0x20 == 'x' {
		digits, base = digits[1:], 16
	}
	if v, err := strconv.ParseUint(digits, base, 8); err != nil || byte(v) != c {
		return 0
	}
	return j + 1
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// replaceRun replaces each whole run of base64 characters holding core.
func replaceRun(text, core string) string {
	for {
		i := strings.Index(text, core)
		if i < 0 {
			return text
		}
		start, end := i, i+len(core)
		for start > 0 && isBase64(text[start-1]) {
			start--
		}
		for end < len(text) && isBase64(text[end]) {
			end++
		}
		text = text[:start] + Mark + text[end:]
	}
}

func isBase64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("+/-_=", c) >= 0
}

// JSON is a JSON value with Secret applied to each of its strings and
// keys, wherever they nest (keys redacted alike keep one of their values); raw itself when none changed. Numbers keep
// every digit. What does not decode (not JSON, nested too deep) is text:
// Secret applied to it whole.
func JSON(raw []byte, secret string) []byte {
	return JSONWith(raw, func(s string) string { return Secret(s, secret) })
}

// JSONWith is JSON with clean in Secret's place.
func JSONWith(raw []byte, clean func(string) string) []byte {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		if r := clean(string(raw)); r != string(raw) {
			return []byte(r)
		}
		return raw
	}
	v, changed := walk(v, clean)
	if !changed {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw // cannot happen: v was decoded from JSON
	}
	return b
}

func walk(v any, clean func(string) string) (any, bool) {
	changed := false
	switch x := v.(type) {
	case string:
		r := clean(x)
		return r, r != x
	case []any:
		for i := range x {
			var c bool
			x[i], c = walk(x[i], clean)
			changed = changed || c
		}
	case map[string]any:
		renamed := map[string]string{}
		for k := range x {
			var c bool
			x[k], c = walk(x[k], clean)
			if r := clean(k); r != k {
				renamed[k], c = r, true
			}
			changed = changed || c
		}
		for k, r := range renamed {
			x[r] = x[k]
			delete(x, k)
		}
	}
	return v, changed
}

// What Topology puts where it cut a URL or a path.
const (
	URLMark  = "[URL cut: only admin devices see the primary's]"
	PathMark = "[path cut: only admin devices see the primary's]"
)

// Compiled on first use, not at init: render imports this package and
// runs at every container start.
var (
	urlRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>\x60]+`) })
	pathRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(^|[\s"'(\[=:,])/[^\s"'<>()\[\],;:/\x60]+(?:/[^\s"'<>()\[\],;:\x60]*)+`)
	})
)

// Topology is text with every URL (scheme://...) replaced with URLMark and
// every absolute filesystem path with PathMark, the rest kept: what a
// server's error says of where it runs (an embedder's endpoint, the
// palace's directory), for a reader who may not see that. A path in
// known (the primary's palace directory, as the primary named it) is cut
// whole, spaces and all, with the path that goes on from it; any other
// path of two elements or more (/a/b) up to a space, quote or bracket
// (attack71 F3: "/tmp/a/my palace (copy)/p/chroma.sqlite3" was cut to
// "[path cut...] palace (copy)/p/chroma.sqlite3").
func Topology(text string, known ...string) string {
	if !strings.Contains(text, "/") {
		return text
	}
	for _, dir := range known {
		text = cutKnown(text, dir)
	}
	text = urlRE().ReplaceAllLiteralString(text, URLMark)
	return pathRE().ReplaceAllString(text, "${1}"+PathMark)
}

// Where pathRE's paths start, and where a path that goes on from a known
// one ends.
const (
	pathAfter = " \t\n\f\r\"'([=:,"
	pathEnd   = " \t\n\f\r\"'<>()[],;:`"
)

// cutKnown is text with each occurrence of the absolute path dir, where a
// path may start, and the path going on from it, replaced with PathMark.
// A dir of no element ("/", "") cuts nothing.
func cutKnown(text, dir string) string {
	dir = strings.TrimRight(dir, "/")
	if !strings.HasPrefix(dir, "/") {
		return text
	}
	var b strings.Builder
	for {
		i := strings.Index(text, dir)
		if i < 0 {
			break
		}
		end := i + len(dir)
		if i > 0 && !strings.ContainsRune(pathAfter, rune(text[i-1])) {
			b.WriteString(text[:end]) // inside a word: "x/tmp/a"
			text = text[end:]
			continue
		}
		if n := strings.IndexAny(text[end:], pathEnd); n >= 0 {
			end += n
		} else {
			end = len(text)
		}
		b.WriteString(text[:i] + PathMark)
		text = text[end:]
	}
	b.WriteString(text)
	return b.String()
}
