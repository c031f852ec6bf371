package merge

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// coreKeyPairs are two keys of one mapping and whether Continue's yaml
// (2.9.1, {uniqueKeys: true, version: '1.2'}; cn 1.5.47 agrees) calls
// them one key named twice. TestCoreKeysAgreeWithContinuesYAML checks
// every verdict against that parser.
var coreKeyPairs = []struct {
	a, b string
	dup  bool
}{
	{`1`, `"1"`, false},
	{`a`, `"a"`, true},
	{`~`, `null`, true},
	{`Null`, `NULL`, true},
	{"? \n  ", `null`, true}, // an empty key is null
	{`!foo 1`, `"1"`, true},  // a tag the parser does not know: the text
	{`0x1`, `1`, true},
	{`<<`, `"<<"`, true}, // 1.2 has no merge key (attack98 F2)
	{`True`, `true`, true},
	{`tRUE`, `true`, false},
	{`yes`, `true`, false}, // 1.1's booleans are strings in 1.2
	{`+.inf`, `.inf`, true},
	{`-.inf`, `.inf`, false},
	{`1e400`, `.Inf`, true},
	{`0001`, `1`, true},
	{`!!int "1"`, `1`, true},
	{`!!float 1`, `"1"`, true}, // no float pattern matches 1: the string
	{`!!float 1`, `1`, false},
	{`! 1`, `"1"`, true},
	{`0o10`, `8`, true},
	{`0o10`, `010`, false},
	{`"a\x41"`, `aA`, true},
	{"? |-\n    a\n  ", `"a"`, true},
	// attack101 F1: refused by the 1.1 rules, loaded by Continue
	{`010`, `8`, false},
	{`0x10`, `0X10`, false},
	{`1_000`, `1000`, false},
	{`1_000`, `"1_000"`, true},
	{`0b11`, `3`, false},
	{`+0x1`, `1`, false},
	{`.nan`, `.NaN`, false},
	{`.nan`, `.nan`, false}, // NaN !== NaN
	{`!!timestamp 2001-12-14`, `!!timestamp 2001-12-14`, false},
	// attack101 F1: written by the 1.1 rules, refused by Continue
	{`010`, `10`, true},
	{`1.0`, `1`, true},
	{`1e3`, `1000`, true},
	{`1.5e+3`, `1500`, true},
	{`-0`, `0`, true},
	{`0.0`, `-0.0`, true},
	{`1.`, `1`, true},
	{`.5`, `+0.5`, true},
	{`0x1F`, `31`, true},
	{`2001-12-14`, `"2001-12-14"`, true},           // no timestamp in 1.2 core
	{`9007199254740993`, `9007199254740992`, true}, // one double
	{`0x20000000000001`, `9007199254740992`, true},
}

func coreKeyDoc(a, b string) string {
	return "models: []\nenv:\n  " + a + ": one\n  " + b + ": two\n"
}

func TestYAMLDuplicateKeysAreComparedAsContinueDoes(t *testing.T) {
	for _, c := range coreKeyPairs {
		_, err := ParseYAML([]byte(coreKeyDoc(c.a, c.b)), "name")
		if dup := err != nil && strings.Contains(err.Error(), "named twice"); dup != c.dup || (err != nil && !dup) {
			t.Errorf("%s beside %s: error %v, want a duplicate: %v", c.a, c.b, err, c.dup)
		}
	}
}

// The table's verdicts are the real parser's: each document parsed by
// the yaml package of the pinned npm clients as Continue parses it.
func TestCoreKeysAgreeWithContinuesYAML(t *testing.T) {
	testbed.Integration(t, "runs node on the pinned yaml package")
	docs := make([]string, len(coreKeyPairs))
	for i, c := range coreKeyPairs {
		docs[i] = coreKeyDoc(c.a, c.b)
	}
	in, err := json.Marshal(docs)
	if err != nil {
		t.Fatal(err)
	}
	script := `const Y = require(process.argv[1]); let s = ''; process.stdin.on('data', d => s += d).on('end', () =>
		console.log(JSON.stringify(JSON.parse(s).map(src => Y.parseDocument(src, {uniqueKeys: true, version: '1.2'}).errors.map(e => e.code)))))`
	cmd := exec.Command(testbed.Node(t), "-e", script, testbed.Module(t, "yaml"))
	cmd.Stdin = strings.NewReader(string(in))
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var codes [][]string
	if err := json.Unmarshal(out, &codes); err != nil || len(codes) != len(docs) {
		t.Fatalf("node said %s (%v)", out, err)
	}
	for i, c := range coreKeyPairs {
		if dup := strings.Join(codes[i], ",") == "DUPLICATE_KEY"; dup != c.dup || (len(codes[i]) > 0 && !dup) {
			t.Errorf("%s beside %s: Continue's yaml says %v, the table says a duplicate: %v", c.a, c.b, codes[i], c.dup)
		}
	}
}
