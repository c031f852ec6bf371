package pyjson

import (
	"testing"

	"github.com/joakimp/devbox-config/strictjson"
)

// dumps is Dumps of JSON text read as the edge reads an agent's.
func dumps(t *testing.T, in string) string {
	t.Helper()
	v, err := strictjson.Decode([]byte(in))
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	b, err := Dumps(v)
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	return string(b)
}

// The texts MemPalace 3.11.0's _sanitize_metadata returned for these
// inputs (want, byte for byte; TestDumpsIsMemPalacesMetadataText checks
// many more against it): spaces after , and :, keys sorted by code
// point, floats as Python's repr, non-ASCII as it is, control characters
// escaped as Python escapes them. attack100 F1: a metadata of 5,100 small
// keys written compactly is 56,101 bytes, 66,300 as MemPalace counts it.
func TestDumpsWritesWhatMemPalaceCounts(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b":1,"a":[1.0,1e5,1E16,1e15,0.0001,0.00001,-0,-0.0,1.5e300,5e-324,123456789012345678901234567890,0.1e1,2.5E-7]}`,
			`{"a": [1.0, 100000.0, 1e+16, 1000000000000000.0, 0.0001, 1e-05, 0, -0.0, 1.5e+300, 5e-324, 123456789012345678901234567890, 1.0, 2.5e-07], "b": 1}`},
		{`{"s":"é€😀 \u0001\u001f\u007f\n\t\"\\\/\b\f\r\u2028","z":{"y":[],"x":{}},"t":true,"f":false,"n":null}`,
			"{\"f\": false, \"n\": null, \"s\": \"é€😀 \\u0001\\u001f\x7f\\n\\t\\\"\\\\/\\b\\f\\r\u2028\", \"t\": true, \"z\": {\"x\": {}, \"y\": []}}"},
		{`{"ä":1,"a":2,"Z":3,"😀":4,"\uffff":5}`, "{\"Z\": 3, \"a\": 2, \"ä\": 1, \"\uffff\": 5, \"😀\": 4}"},
		{`{}`, `{}`},
	} {
		if got := dumps(t, c.in); got != c.want {
			t.Errorf("Dumps(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}
