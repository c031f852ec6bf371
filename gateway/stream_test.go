package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway/provenance"
)

// The stream's frames pass whole, each event with its origin, in
// whatever pieces the upstream's bytes come; a withheld event's frame is
// left out, a heartbeat passes, and an answer that is not a stream (the
// upstream's 400) passes as it is.
func TestOriginStream(t *testing.T) {
	g := newGW(t, nil)
	if err := g.srv.prov.Record(context.Background(), provenance.Entry{Key: provenance.Event("evt_1"), Stamp: provenance.Stamp{Device: "laptop-7f3a", Label: "laptop", Agent: "opencode@laptop"}}); err != nil {
		t.Fatal(err)
	}
	stream := "id: evt_1\nevent: logstream\ndata: {\"id\":\"evt_1\",\"from_agent\":\"opencode@laptop\",\"body\":\"a\\n\\nb\"}\n\n" +
		": ping\n\n" +
		"id: evt_2\nevent: logstream\ndata: {\"id\":\"evt_2\",\"from_agent\":\"pi@desk\"}\n\n"
	for _, c := range []struct {
		d    Device
		want []string
		not  []string
	}{
		{Device{ID: "desk-9b21"}, []string{`"origin": {"device":"laptop-7f3a","label":"laptop","agent":"opencode@laptop","at":`, `"id":"evt_2","from_agent":"pi@desk", "origin": {"device":"unknown","trusted":true}}`, ": ping\n\n"}, nil},
		{Device{ID: "desk-9b21", Trusts: []string{"ops-0001"}, Untrusted: UntrustedWithhold}, []string{": ping\n\n"}, []string{"evt_1", "evt_2"}},
	} {
		rec := httptest.NewRecorder()
		w := g.srv.originsOfStream(rec, &c.d)
		w.WriteHeader(200)
		for i := 0; i < len(stream); i += 7 { // in pieces that split frames and lines
			w.Write([]byte(stream[i:min(i+7, len(stream))]))
		}
		w.(http.Flusher).Flush()
		got := rec.Body.String()
		for _, s := range c.want {
			if !strings.Contains(got, s) {
				t.Errorf("%+v: the stream lacks %q:\n%s", c.d, s, got)
			}
		}
		for _, s := range c.not {
			if strings.Contains(got, s) {
				t.Errorf("%+v: the stream has %q:\n%s", c.d, s, got)
			}
		}
		if strings.Count(got, "\n\n") != 3-len(c.not) {
			t.Errorf("%+v: frames are not passed whole:\n%q", c.d, got)
		}
	}
	rec := httptest.NewRecorder()
	w := g.srv.originsOfStream(rec, &Device{ID: "d", Trusts: []string{"d"}})
	w.WriteHeader(400)
	w.Write([]byte(`{"error": "bad filter"}`))
	if rec.Code != 400 || rec.Body.String() != `{"error": "bad filter"}` {
		t.Errorf("an error answer: %d %q", rec.Code, rec.Body.String())
	}
}
