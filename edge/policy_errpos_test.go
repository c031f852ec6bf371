package edge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A policy.json that does not parse, or holds a key or value it may not,
// is refused with the file, line and column of the mistake and its fix
// (before: encoding/json's words alone, "invalid character '}' looking for
// beginning of object key string"), and the file is left as it was.
// Found by an outside tester.
func TestPolicyErrorNamesLineColumnAndFix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"trailing comma", "{\"version\":1,\n \"wings\": {\"workspace\": {\"replicate\": \"local\"},}}\n",
			[]string{"policy.json:2:47: ", "(fix: ", "remove the comma"}},
		{"missing comma", "{\"version\":1\n \"wings\": {}}\n",
			[]string{"policy.json:2:2: ", "(fix: ", "comma"}},
		{"comment", "// mine\n{\"version\":1}\n",
			[]string{"policy.json:1:1: ", "(fix: ", "comment"}},
		{"cut short", "{\"version\":1,\n \"wings\": {\n",
			[]string{"policy.json:3:1: ", "(fix: ", "close"}},
		{"unknown key", "{\"version\":1,\n \"wing\": {}}\n",
			[]string{"policy.json:2:2: ", `"wing"`, "(fix: ", `"wings"`}},
		{"unknown nested key", "{\"version\":1,\n \"wings\": {\"w\": {\"replicate\": \"local\",\n   \"replicat\": \"local\"}}}\n",
			[]string{"policy.json:3:4: ", `"replicat"`, `wings["w"]`, "(fix: ", `"replicate"`}},
		{"key in another case", "{\"version\":1,\"wings\":{\"workspace\":{\"replicate\":\"local\", \"Replicate\":\"replicated\"}}}\n", // attack73 F1: the wing was replicated
			[]string{"policy.json:1:57: ", `unknown key "Replicate"`, `wings["workspace"]`, "(fix: ", `did you mean "replicate"?`}},
		{"escaped plain character", "{\"version\":1,\"wings\":{\"workspace\":{\"replicate\":\"r\\u0065plicated\"}}}\n", // attack75 F1: reads as no value a reviewer greps for
			[]string{"policy.json:1:50: ", `"replicated" is written with \u0065 for "e"`, "(fix: ", "write the character itself"}},
		{"wrong type", "{\"version\":1,\n \"wings\": [\"workspace\"]}\n",
			[]string{"policy.json:2:11: ", "wings", "an array", "(fix: ", "an object"}},
		{"something after", "{\"version\":1}\n{\"version\":1}\n",
			[]string{"policy.json:2:1: ", "(fix: "}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, PolicyFile)
			os.WriteFile(file, []byte(c.body), 0o600)
			_, err := LoadPolicy(dir)
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.HasPrefix(err.Error(), file+":") {
				t.Errorf("%v: does not begin with the file's name", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: does not say %q", err, w)
				}
			}
			if b, _ := os.ReadFile(file); string(b) != c.body {
				t.Error("policy.json changed")
			}
		})
	}
}

// A policy value that parses but is refused names its line and column too.
func TestPolicyValidationNamesLineColumn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, PolicyFile)
	os.WriteFile(file, []byte("{\"version\": 1,\n \"wings\": {\"x*\": {\"replicate\": \"sometimes\"}}}\n"), 0o600)
	_, err := LoadPolicy(dir)
	if err == nil || !strings.HasPrefix(err.Error(), file+":2:32: wings[\"x*\"].replicate: \"sometimes\" must be") || !strings.Contains(err.Error(), "(fix: ") {
		t.Errorf("got %v, want %s:2:32: wings[\"x*\"].replicate: ... (fix: ...", err, file)
	}
}
