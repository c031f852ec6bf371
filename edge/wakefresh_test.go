package edge

import (
	"context"
	"strings"
	"testing"
	"time"
)

// keptSession runs one session on palace against url that stays until
// the primary's event_list schema is kept, and ends it.
func keptSession(t *testing.T, palace, url string) {
	t.Helper()
	h := start(t, harnessOpts{palace: palace, primaryURL: url, wakeWait: 10 * time.Second})
	h.eventually("the event_list schema kept", func() bool { _, ok := h.edge.keptListParams(context.Background()); return ok })
	h.s.Close()
	<-h.done
}

// An edge that heard the primary's event_list schema in an earlier
// session does not list the primary's tools before its first read of the
// owed asks: a session starting with a primary whose tools/list is slow
// (here: never answered within the wait) is told the ask posted since
// the last session. Before, the first read waited for a tools/list (two
// per start), past the wake-up's wait, and the session was told the last
// session's view, without the new ask (outside tester, attack35 F2).
func TestTheFirstReadDoesNotWaitForAToolList(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	palace := t.TempDir() + "/palace"
	keptSession(t, palace, srv.URL())
	id := askVia(t, srv.URL(), testToken, "pi@laptop", "opencode@edge-test", "posted since the last session")
	h := start(t, harnessOpts{palace: palace, primaryURL: slowAnswerProxy(t, srv.URL(), "tools/list", time.Minute, 0), wakeWait: 10 * time.Second})
	if in := instructionsOf(h); !strings.Contains(in, id) || strings.Contains(in, "earlier session") {
		t.Fatalf("the session start is not told the ask posted since the last session:\n%s", in)
	}
}

// A session whose own read is not in when it starts (the primary up) is
// told from the view an earlier session kept, saying so, and that newer
// asks come as notes or from mempalace_mailbox; a kept view with nothing
// owed says that much too rather than nothing. Before, the header said
// only "(as of <time>)", and an empty kept view gave no instructions,
// read as "nothing owed" (outside tester, attack35 F2).
func TestAWakeFromAnEarlierSessionsViewSaysSo(t *testing.T) {
	t.Parallel()
	for _, owed := range []bool{true, false} {
		_, srv := startPrimary(t)
		palace := t.TempDir() + "/palace"
		if owed {
			askVia(t, srv.URL(), testToken, "pi@laptop", "opencode@edge-test", "kept from the last session")
		}
		keptSession(t, palace, srv.URL())
		h := start(t, harnessOpts{palace: palace, primaryURL: holdingProxy(t, srv.URL()), wakeWait: 50 * time.Millisecond})
		in := instructionsOf(h)
		for _, want := range []string{"read by an earlier session", "notes on tool answers", "mempalace_mailbox"} {
			if !strings.Contains(in, want) {
				t.Errorf("owed %v: the session start lacks %q:\n%s", owed, want, in)
			}
		}
		if owed != strings.Contains(in, "kept from the last session") {
			t.Errorf("owed %v: instructions:\n%s", owed, in)
		}
	}
}

// A session that ends right after initialize (a harness probing its
// servers) lets its first read of the owed asks finish and keeps the
// view: the next session, whose own read is held, is told the ask from
// it. Before, the read was cut at the end of input and the kept view
// stayed an older one, without the ask (outside tester, attack35 F2).
func TestAProbeSessionKeepsTheFreshView(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	palace := t.TempDir() + "/palace"
	keptSession(t, palace, srv.URL())
	id := askVia(t, srv.URL(), testToken, "pi@laptop", "opencode@edge-test", "posted before a probe")
	probe := start(t, harnessOpts{palace: palace, primaryURL: slowAnswerProxy(t, srv.URL(), "mempalace_event_list", 300*time.Millisecond, 0), wakeWait: -1})
	probe.s.Close()
	<-probe.done
	next := start(t, harnessOpts{palace: palace, primaryURL: holdingProxy(t, srv.URL()), wakeWait: 50 * time.Millisecond})
	if in := instructionsOf(next); !strings.Contains(in, id) {
		t.Fatalf("the session after a probe is not told the ask the probe read:\n%s", in)
	}
}
