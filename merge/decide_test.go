package merge

import (
	"testing"

	"github.com/joakimp/devbox-config/fingerprint"
)

func TestDecideTable(t *testing.T) {
	a := []byte(`{"type":"local","command":["mempalace-mcp"]}`)
	aReordered := []byte(`{ "command": ["mempalace-mcp"], "type": "local" }`)
	b := []byte(`{"type":"remote","url":"u"}`)
	c := []byte(`{"type":"remote","url":"u","timeout":9}`)
	fp := func(v []byte) string { s, _ := fingerprint.Of(v); return s }
	cases := []struct {
		name string
		in   Input
		want Action
	}{
		{"live equals desired, no record: adopt", Input{Live: aReordered, Desired: a}, Unchanged},
		{"both absent", Input{Record: fp(a)}, Unchanged},
		{"absent, no record: insert", Input{Desired: a}, Insert},
		{"absent, we removed it: insert", Input{Desired: a, Record: fingerprint.Absent}, Insert},
		{"absent, record: user deleted", Input{Desired: b, Record: fp(a)}, KeepDeleted},
		{"absent, record, reclaim", Input{Desired: b, Record: fp(a), Reclaim: true}, Insert},
		{"equals record: env wins", Input{Live: a, Desired: b, Record: fp(a)}, Replace},
		{"equals record after reformatting: env wins", Input{Live: aReordered, Desired: b, Record: fp(a)}, Replace},
		{"equals record, nothing wanted: remove", Input{Live: a, Record: fp(a)}, Remove},
		{"differs from record: keep edit", Input{Live: c, Desired: a, Record: fp(b)}, KeepEdit},
		{"differs from record, reclaim", Input{Live: c, Desired: a, Record: fp(b), Reclaim: true}, Replace},
		{"present, no record, differs: keep edit", Input{Live: c, Desired: b}, KeepEdit},
		{"present, record says absent: keep edit", Input{Live: c, Desired: b, Record: fingerprint.Absent}, KeepEdit},
		{"user's edit, nothing wanted: keep", Input{Live: c, Record: fp(a)}, KeepEdit},
	}
	for _, tc := range cases {
		got, err := Decide(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}
