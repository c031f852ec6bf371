package redact

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

const token = "Ab+cd/ef=gh_0123456789xyzXYZ"

// Every shape in which a server was seen repeating the token it was sent
// (found by an outside tester) says neither the token nor any piece of it
// that identifies it once redacted, and keeps what the text said around it.
func TestSecretInEveryShapeIsRedacted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, text, keeps string }{
		{"raw", "token " + token + " is not allowed here", "is not allowed here"},
		{"bearer", "internal: auth=Bearer " + token, "internal: auth=Bearer [redacted]"},
		{"lower-case", "authorization: " + strings.ToLower("Bearer "+token), "authorization: bearer [redacted]"},
		{"lower-case token", "got " + strings.ToLower(token) + " here", "got [redacted] here"},
		{"query escaped", "redirect to /login?next=%2Fmcp&auth=" + url.QueryEscape("Bearer "+token) + "&x=1", "&x=1"},
		{"path escaped", "/a/" + url.PathEscape(token) + "/b", "/a/[redacted]/b"},
		{"escaped lower hex", "auth=" + strings.ToLower(url.QueryEscape(token)) + " done", "auth=[redacted] done"},
		{"space as %20", "auth=Bearer%20" + url.QueryEscape(token) + "&x", "&x"},
		{"std base64 of the header", "debug: " + base64.StdEncoding.EncodeToString([]byte("Bearer "+token)) + " end", "debug: [redacted] end"},
		{"std base64 of the token", "debug: " + base64.StdEncoding.EncodeToString([]byte(token)), "debug: [redacted]"},
		{"url base64 unpadded", "x " + base64.RawURLEncoding.EncodeToString([]byte("auth "+token)) + " y", "x [redacted] y"},
		{"url base64 offset 2", "x " + base64.URLEncoding.EncodeToString([]byte("ab"+token+"!")) + " y", "x [redacted] y"},
		{"basic", "sent Authorization: Basic dXNlcjpwYXNz, refused", "Basic [redacted], refused"},
		{"hex", "tok hex " + hex.EncodeToString([]byte(token)) + " end", "tok hex [redacted] end"},
		{"upper-case hex", "tok " + strings.ToUpper(hex.EncodeToString([]byte(token))) + ".", "tok [redacted]."},
		{"percent-encoded twice", "next=" + url.QueryEscape(url.QueryEscape(token)) + "&x=1", "next=[redacted]&x=1"},
		{"html decimal", "internal: " + entities(token, "&#%d;") + " <", "internal: [redacted] <"},
		{"html hex", "internal: " + entities(token, "&#X%x;") + " <", "internal: [redacted] <"},
		{"mime base64", "internal: " + mime("padding-padding-padding-padding-padding-padding-pad:"+token) + "(end)", "internal: [redacted]\n(end)"},
		{"json", `{"headers":{"authorization":"Bearer ` + token + `"}}`, `"Bearer [redacted]"`},
	} {
		got := Secret(c.text, token)
		leaks := []string{token, strings.ToLower(token), url.QueryEscape(token), token[:14], token[14:], hex.EncodeToString([]byte(token[:7])), "&#43;", "&#x2b;"}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			for k := range 3 {
				b := enc.EncodeToString([]byte(token[k:]))
				leaks = append(leaks, b[:12])
			}
		}
		for _, l := range leaks {
			if strings.Contains(strings.ToLower(got), strings.ToLower(l)) {
				t.Errorf("%s: %q still holds %q", c.name, got, l)
			}
		}
		if !strings.Contains(got, c.keeps) {
			t.Errorf("%s: %q lost %q", c.name, got, c.keeps)
		}
	}
}

// entities is s with every byte but letters and digits as an HTML
// numeric entity in format f.
func entities(s, f string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, f, c)
		}
	}
	return b.String()
}

// mime is s in base64 wrapped at 76 columns, as MIME (and Python's
// base64.encodebytes) writes it.
func mime(s string) string {
	e := base64.StdEncoding.EncodeToString([]byte(s))
	var b strings.Builder
	for len(e) > 76 {
		b.WriteString(e[:76] + "\n")
		e = e[76:]
	}
	return b.String() + e + "\n"
}

// Text without the secret or a credential is left as it is, and no
// secret (a gateway without an upstream token) takes out only
// credentials.
func TestTextWithoutTheSecretIsKept(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", "drawer not found: d_1234", "wing \"shared\" is not granted (fix: ask)", "QUJDREVGR0hJSktMTU5PUA== is base64 but no token", "QUJDREVG\nR0hJSktM\r\nTU5PUA==\n", "&#43;&amp; 100%25 0x41"} {
		if got := Secret(text, token); got != text {
			t.Errorf("Secret(%q) = %q", text, got)
		}
	}
	if got := Secret("Bearer x1 and "+token, ""); got != "Bearer [redacted] and "+token {
		t.Errorf("no secret: %q", got)
	}
}

// A JSON value's strings and keys are redacted wherever they nest, even nested
// too deep to decode; its numbers keep every digit; an unchanged value
// is the same bytes.
func TestJSONRedactsEveryString(t *testing.T) {
	t.Parallel()
	in := []byte(`{"code":12345678901234567890,"why":["a", {"h":"Bearer ` + token + `"}],"t":"` + token + `","k":{"` + token + `":1}}`)
	got := string(JSON(in, token))
	if strings.Contains(got, token) || !strings.Contains(got, "12345678901234567890") || strings.Count(got, Mark) != 3 {
		t.Errorf("JSON = %s", got)
	}
	deep := strings.Repeat("[", 20000) + `"` + token + `"` + strings.Repeat("]", 20000)
	if got := string(JSON([]byte(deep), token)); strings.Contains(got, token) {
		t.Errorf("JSON too deep to decode keeps the secret")
	}
	same := []byte(`{"b": 1,  "a":"x"}`)
	if got := JSON(same, token); string(got) != string(same) {
		t.Errorf("unchanged JSON rewritten: %s", got)
	}
}

// An error's URLs and absolute paths are cut for a reader who may not see
// the primary's topology, each with a mark saying what was cut; the rest
// of the message is kept.
func TestTopologyCutsURLsAndPaths(t *testing.T) {
	t.Parallel()
	in := `Embedding API request to http://127.0.0.1:19501/v1/embeddings failed: <urlopen error [Errno 111] Connection refused>; palace "/srv/palace/chroma.sqlite3" (see /root/.mempalace/config.json), wing shared/room, ratio 1/2`
	want := `Embedding API request to ` + URLMark + ` failed: <urlopen error [Errno 111] Connection refused>; palace "` + PathMark + `" (see ` + PathMark + `), wing shared/room, ratio 1/2`
	if got := Topology(in); got != want {
		t.Errorf("Topology =\n%s\nwant\n%s", got, want)
	}
	if got := string(JSONWith([]byte(`{"details":"at https://embed.lan/v1 down"}`), func(s string) string { return Topology(s) })); got != `{"details":"at `+URLMark+` down"}` {
		t.Errorf("JSONWith(Topology) = %s", got)
	}
}

// attack71 F3: a path with a space that the reader's cutter knows (the
// primary's palace directory) is cut whole, with the path going on from
// it, wherever it stands; before, the cut stopped at the first space and
// the reader saw "palace (copy)/p/chroma.sqlite3". Paths it does not know
// are still cut by their look, and a known path inside a word is not.
func TestTopologyCutsAKnownPathWholeSpacesAndAll(t *testing.T) {
	t.Parallel()
	const palace, mac = "/tmp/attack71/prim2/my palace (copy)/p", "/Users/alice/Library/Application Support/mempalace/palace"
	for _, c := range []struct{ known, in, want string }{
		{palace, "Could not open missing database at " + palace + "/chroma.sqlite3.", "Could not open missing database at " + PathMark},
		{palace, "no quick_check ran: " + palace + "/chroma.sqlite3 does not exist, so there was no SQLite database to open",
			"no quick_check ran: " + PathMark + " does not exist, so there was no SQLite database to open"},
		{mac + "/", "unable to open " + mac + "/chroma.sqlite3: locked; see /var/log/mp.log", "unable to open " + PathMark + ": locked; see " + PathMark},
		{palace, `palace "` + palace + `" twice: (` + palace + `)`, `palace "` + PathMark + `" twice: (` + PathMark + `)`},
		{"/data", "wing shared/data, room notes/data", "wing shared/data, room notes/data"},
		{"/data", "at /data/chroma.sqlite3", "at " + PathMark},
		{"/", "at /srv/a/b c", "at " + PathMark + " c"},
	} {
		if got := Topology(c.in, c.known); got != c.want {
			t.Errorf("Topology(%q, %q) =\n%s\nwant\n%s", c.in, c.known, got, c.want)
		}
	}
}
