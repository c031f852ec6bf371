package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/provenance"
)

// The stream's frames pass whole, each event with its origin, in
// whatever pieces the upstream's bytes come; a withheld event's frame is
// left out, a heartbeat passes, and an answer that is not a stream (the
// upstream's 400) passes as it is.
func TestOriginStream(t *testing.T) {
	t.Parallel()
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

// An upstream that never ends a frame: the gateway holds at most
// maxAnswer of it, then ends the device's stream (logged) with the whole
// frames before it and nothing of the unfinished one.
func TestStreamFrameIsBounded(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": ping\n\nid: evt_1\nevent: logstream\ndata: {\"id\":\"evt_1\",\"body\":\"")
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for sent := 0; sent <= maxAnswer+len(chunk); sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		<-r.Context().Done() // the frame never ends
	}))
	defer up.Close()
	g := newGWAt(t, devices, &upstream{name: "endless", url: up.URL + "/mcp"})
	var logged bytes.Buffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.http.URL+"/logstream/stream?to_agent=opencode@laptop", nil)
	req.Header.Set("Authorization", "Bearer "+g.tokens["laptop-7f3a"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != ": ping\n\n" {
		t.Fatalf("the stream did not end after the frames before the endless one: %v, %d bytes: %.100q", err, len(got), got)
	}
	if !strings.Contains(logged.String(), "frame") {
		t.Errorf("the stream's end is not logged: %s", logged.String())
	}
}

// A long frame in small pieces passes whole, with its origin.
func TestStreamLongFrameInSmallPieces(t *testing.T) {
	t.Parallel()
	g := newGW(t, nil)
	rec := httptest.NewRecorder()
	w := g.srv.originsOfStream(rec, &Device{ID: "desk-9b21"})
	w.WriteHeader(200)
	frame := "data: {\"id\":\"evt_1\",\"body\":\"" + strings.Repeat("x", 1<<20) + "\"}\n\n"
	for i := 0; i < len(frame); i += 512 {
		w.Write([]byte(frame[i:min(i+512, len(frame))]))
	}
	if !strings.Contains(rec.Body.String(), `"origin": {"device":"unknown","trusted":true}}`) {
		t.Fatalf("the frame did not pass: %.200q", rec.Body.String())
	}
}

// BenchmarkStreamLongFrame is a long frame in 512-byte pieces: its cost
// is its bytes' (81 and 102 MB/s at 1 and 16 MB), not its bytes times its
// pieces, as when every Write searched the whole frame so far for its end
// (15 and 1.2 MB/s: 14 s for 16 MB). A benchmark, not a timed test: under
// the race detector a 2 s bound on 16 MB failed CI.
func BenchmarkStreamLongFrame(b *testing.B) {
	g := newGW(b, nil)
	for _, size := range []int{1 << 20, 16 << 20} {
		frame := []byte("data: {\"id\":\"evt_1\",\"body\":\"" + strings.Repeat("x", size) + "\"}\n\n")
		b.Run(fmt.Sprintf("%dMB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				w := g.srv.originsOfStream(httptest.NewRecorder(), &Device{ID: "desk-9b21"})
				w.WriteHeader(200)
				for i := 0; i < len(frame); i += 512 {
					w.Write(frame[i:min(i+512, len(frame))])
				}
			}
		})
	}
}
