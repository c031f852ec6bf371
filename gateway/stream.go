package gateway

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/jsondepth"
)

// originStream is the origin step of /logstream/stream: a ResponseWriter
// in front of the client's that passes the upstream's SSE frames on whole,
// each event's data with its origin added, or the frame left out when the
// device withholds what it does not trust. A frame is passed on once its
// blank line has arrived; heartbeats and anything else without data pass
// as they are. The upstream sends each event as one line of JSON (mempalace
// surface §6.6); a data line that is not one JSON object reaches a device
// that trusts every record as it is, and no device that names a set.
// A frame is at most maxAnswer, what the gateway reads of any one
// answer: past it the stream ends, with none of that frame.
type originStream struct {
	http.ResponseWriter
	a       *annotator
	log     *slog.Logger
	pending []byte
	scanned int  // the bytes of pending searched for a frame's end
	asIs    bool // not a stream: the upstream's error, passed on
	ended   bool // a frame passed maxAnswer
}

// errFrameTooLong ends a stream whose frame passed maxAnswer.
var errFrameTooLong = errors.New("an event frame longer than the gateway reads of one answer")

// originsOfStream is w with the origin step of /logstream/stream for d
// (w itself when there is no provenance index).
func (s *Server) originsOfStream(w http.ResponseWriter, d *Device) http.ResponseWriter {
	t, _ := catalogue.Lookup("event_list")
	if a := s.annotatorFor(d, t); a != nil {
		return &originStream{ResponseWriter: w, a: a, log: s.Log}
	}
	return w
}

// WriteHeader: only a 200 is a stream of frames.
func (o *originStream) WriteHeader(code int) {
	o.asIs = code != http.StatusOK
	o.ResponseWriter.WriteHeader(code)
}

// Write takes the upstream's bytes as they come and passes on the frames
// they complete; an error ends the stream.
func (o *originStream) Write(b []byte) (int, error) {
	if o.asIs {
		return o.ResponseWriter.Write(b)
	}
	if o.ended {
		return 0, errFrameTooLong
	}
	o.pending = append(o.pending, b...)
	for {
		end := bytes.Index(o.pending[o.scanned:], []byte("\n\n"))
		if end < 0 {
			break
		}
		end += o.scanned
		frame := o.pending[:end+2]
		if out, keep := o.frame(frame); keep {
			if _, err := o.ResponseWriter.Write(out); err != nil {
				return len(b), err
			}
		}
		o.pending, o.scanned = o.pending[end+2:], 0
	}
	o.scanned = max(len(o.pending)-1, 0) // its last byte may be the first \n
	if len(o.pending) > maxAnswer {
		o.ended, o.pending = true, nil
		o.log.Warn("logstream: the upstream's frame passed the gateway's cap; the device's stream is ended", "device", o.a.d.ID, "cap", maxAnswer)
		return len(b), errFrameTooLong
	}
	return len(b), nil
}

// frame is one SSE frame as the device gets it (keep false: left out).
func (o *originStream) frame(frame []byte) (out []byte, keep bool) {
	lines := bytes.SplitAfter(frame, []byte("\n"))
	for i, l := range lines {
		data, ok := bytes.CutPrefix(l, []byte("data: "))
		if !ok {
			continue
		}
		data = bytes.TrimSuffix(data, []byte("\n"))
		ev := gjson.ParseBytes(data)
		if !jsondepth.Valid(data) || !ev.IsObject() {
			return frame, o.a.d.Trusts == nil
		}
		rec, keep, err := o.a.item([]byte("data: "), ev, o.a.read(ev))
		if err != nil || !keep {
			return nil, false
		}
		lines[i] = append(rec, '\n')
	}
	return bytes.Join(lines, nil), true
}

// Flush passes on what the frames so far made of the stream.
func (o *originStream) Flush() {
	if f, ok := o.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// DefaultStreamShare is how many /logstream/stream relays one device may
// hold open at once when its max_streams is 0 and it has at most two
// agents; a device with more holds one per agent (streamShare). MemPalace
// 3.11 serves 8 streams at once to every client together (its
// MEMPALACE_SSE_MAX_CLIENTS) and answers the next 503: without a share,
// one device held them all (attack69 F11).
const DefaultStreamShare = 2

// streamShare is d's share: its max_streams, or else one stream for each
// of its agents (a stream names one to_agent), and at least
// DefaultStreamShare.
func streamShare(d *Device) int {
	return cmp.Or(d.MaxStreams, max(DefaultStreamShare, len(d.Agents)))
}

// streamHold is one open /logstream/stream relay and what it was
// authorized under, so that a change of either ends it (recheckStreams).
type streamHold struct {
	device   string
	token    string // the bearer presented, authenticated again as the config and the clock move
	scope    string // the device's header then: its grants, agents, coordinator flag and trust
	end      context.CancelFunc
	opened   time.Time
	freed    time.Time // once ended: when the primary has surely freed its slot
	replaced bool      // ended for its device's new stream, which took its place (openStreams.mu)
	returned bool      // its relay has returned (done; openStreams.mu)
}

// streamReplaceAge is how long a relay has been open before a stream past
// its device's share may end it: a reconnect after sleep finds its dead
// relays older, a device cycling streams finds its own too young (an
// ended stream keeps its slot at the primary a while, upstreamSlotLinger:
// ending fresh ones let one device fill all 8, attack72 F1).
const streamReplaceAge = time.Minute

// upstreamSlotLinger is how long the primary may hold a stream's slot
// after the gateway ends its relay, so long its device's share counts
// it (attack111 F2: a device closing its own streams, never holding
// more than one, filled all 8). MemPalace 3.11 frees a slot only when a
// write to the stream fails, and writes to an idle one only its ping,
// 15 s after its last write, after a poll of up to 0.7 s. The gateway
// ends a relay's upstream connection with a reset (streamDialer), so
// that first ping fails; after a plain close the ping went through and
// only the next one failed: measured against real serve, slots freed
// 13-16 s after a reset, 22-31 s after a close. 20 s leaves a loaded
// primary's poll its margin; TestRealStreamShareHoldsAtThePrimary checks
// it.
const upstreamSlotLinger = 20 * time.Second

// openStreams is the relays open now, and those ended whose slot the
// primary may still hold.
type openStreams struct {
	mu    sync.Mutex
	holds []*streamHold
	gone  []*streamHold // ended, each until its freed; those replaced count in no share
}

// shareFull is why a device's stream was refused: when it may try
// again, and how many of its ended streams still count (0: its open
// streams alone hold its share).
type shareFull struct {
	retry time.Duration
	ended int
}

// add holds h if its device's open and lingering relays leave it room
// in share, letting go of its oldest open ones that leave it none (the
// caller ends them once the primary accepts h, or restores them; each
// hands its place in the share to h, review34 R3); unless one of those opened less than streamReplaceAge before h,
// or too few are open: then h is not held (ok false).
func (o *openStreams) add(h *streamHold, share int) (over []*streamHold, full shareFull, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := h.opened
	o.gone = slices.DeleteFunc(o.gone, func(x *streamHold) bool { return !x.freed.After(now) })
	others := func(x *streamHold) bool { return x.device != h.device }
	mine := slices.DeleteFunc(slices.Clone(o.holds), others)
	slices.SortStableFunc(mine, func(a, b *streamHold) int { return a.opened.Compare(b.opened) })
	gone := slices.DeleteFunc(slices.Clone(o.gone), func(x *streamHold) bool { return others(x) || x.replaced })
	need, ok := admits(mine, gone, share, now)
	if !ok {
		return nil, shareFull{retry: untilAdmitted(mine, gone, share, now), ended: len(gone)}, false
	}
	over = mine[:need]
	for _, x := range over { // its slot at the primary lingers, though not in its device's share (primaryFull)
		x.replaced, x.freed = true, now.Add(upstreamSlotLinger)
	}
	o.gone = append(o.gone, over...)
	o.holds = append(slices.DeleteFunc(o.holds, func(x *streamHold) bool { return slices.Contains(over, x) }), h)
	return over, shareFull{}, true
}

// admits is whether a device's open relays (mine, oldest first) and
// ended ones (gone) leave room at t for one more, and how many of its
// oldest open ones it ends for it (need): it ends none opened less than
// streamReplaceAge before t.
func admits(mine, gone []*streamHold, share int, t time.Time) (need int, ok bool) {
	lingering := 0
	for _, x := range gone {
		if x.freed.After(t) {
			lingering++
		}
	}
	need = max(len(mine)+lingering+1-share, 0)
	return need, need <= len(mine) && (need == 0 || !t.Before(mine[need-1].opened.Add(streamReplaceAge)))
}

// untilAdmitted is how long from now until admits holds for the relays
// as they are: at an ended one's freed, or an open one's turning
// streamReplaceAge old (review34 R2: it was the oldest open one's, past
// already for a relay a minute old, so a 429 said 1 s for a 20 s wait).
func untilAdmitted(mine, gone []*streamHold, share int, now time.Time) time.Duration {
	var at []time.Time
	for _, x := range gone {
		at = append(at, x.freed)
	}
	for _, x := range mine {
		at = append(at, x.opened.Add(streamReplaceAge))
	}
	slices.SortFunc(at, time.Time.Compare)
	for _, t := range at {
		if _, ok := admits(mine, gone, share, t); ok && t.After(now) {
			return t.Sub(now)
		}
	}
	return streamReplaceAge // not reached: a share is at least 1
}

// restore undoes add's letting go of over for h, which the primary
// refused: h is let go, and each of over, never ended, is held again;
// one whose relay returned meanwhile counts as done would have counted it.
func (o *openStreams) restore(h *streamHold, over []*streamHold) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.holds = slices.DeleteFunc(o.holds, func(x *streamHold) bool { return x == h })
	for _, x := range over {
		x.replaced = false
		if !x.returned {
			x.freed = time.Time{}
			o.gone = slices.DeleteFunc(o.gone, func(y *streamHold) bool { return y == x })
			o.holds = append(o.holds, x)
		}
	}
}

// remove lets h go (once ended, or again: a no-op).
func (o *openStreams) remove(h *streamHold) {
	o.mu.Lock()
	o.holds = slices.DeleteFunc(o.holds, func(x *streamHold) bool { return x == h })
	o.mu.Unlock()
}

// done lets h go once its relay has returned, counting it against its
// device's share until freed when the primary gave it a slot (freed not
// zero), unless add reserved it for its device's new stream and
// settleStream ended it once the primary took that one, which counts in
// its place (a laptop back from sleep gets all its streams back at once;
// add keeps it until freed, for primaryFull). Its slot at the primary is
// free within upstreamSlotLinger, and
// the relays so ended in any upstreamSlotLinger were all open at its
// start, each being streamReplaceAge old, longer: at most the share. So
// a device holds at most twice its share of the primary's slots, and
// that only just after it ends streams a minute old (attack111 F2).
func (o *openStreams) done(h *streamHold, freed time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.holds = slices.DeleteFunc(o.holds, func(x *streamHold) bool { return x == h })
	h.returned = true
	if !freed.IsZero() && !h.replaced {
		h.freed = freed
		o.gone = append(o.gone, h)
	}
}

// lingering is the relays ended whose slots the primary may still hold
// at now, the first to be freed first.
func (o *openStreams) lingering(now time.Time) []*streamHold {
	o.mu.Lock()
	defer o.mu.Unlock()
	gone := slices.DeleteFunc(slices.Clone(o.gone), func(x *streamHold) bool { return !x.freed.After(now) })
	slices.SortFunc(gone, func(a, b *streamHold) int { return a.freed.Compare(b.freed) })
	return gone
}

func (o *openStreams) all() []*streamHold {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.holds)
}

// holdStream counts d's relay h against the device's share, with the
// relays it ended less than upstreamSlotLinger ago; over it, the
// device's oldest open relays it lets go for h (over: settleStream ends
// them), so a reconnect gets its stream, though the connections it left
// behind (a laptop that slept) still look open to the gateway; but not
// one opened within streamReplaceAge, nor one the device's ended streams
// crowd out: then h is refused 429 with a Retry-After, the time until a
// stream would get through (false). After true, settleStream and
// s.open.done(h, ...) must follow.
func (s *Server) holdStream(x *exchange, d *Device, h *streamHold) (over []*streamHold, ok bool) {
	share := streamShare(d)
	over, full, ok := s.open.add(h, share)
	if !ok {
		s.quietPastFew(x, d, ruleStreamShare)
		secs := int((max(full.retry, time.Second) + time.Second - 1) / time.Second) // up: a client that waits it gets through (attack115 F4)
		x.w.Header().Set("Retry-After", strconv.Itoa(secs))
		held := fmt.Sprintf("all of them open, one it would end for the new one opened less than %s ago (a stream is ended for its device's new one only once that old)", streamReplaceAge)
		if full.ended > 0 {
			held = fmt.Sprintf("counting the %d streams it ended in the last %s, whose slots the primary frees only then, and any opened less than %s ago is not ended for a new one", full.ended, upstreamSlotLinger, streamReplaceAge)
		}
		s.answerText(x, http.StatusTooManyRequests, fmt.Sprintf("devbox-config gateway: %s holds its share of /logstream/stream (%d: max_streams, by default one per agent and at least 2), %s: retry in %d s, or the operator raises \"max_streams\" in the device's entry of the gateway config", d.ID, share, held, secs), VerdictLimited, ruleStreamShare)
		return nil, false
	}
	return over, true
}

// settleStream ends over, the relays holdStream let go for d's new
// stream h, once the primary has answered h (status): accepted, or
// refused 503 while no ended stream's slot lingers there, as ending
// them is then what frees one (a laptop back from sleep, its old streams
// dead). Otherwise they were never ended and are held again: a reconnect
// the primary refuses costs the device none of its open streams, and the
// 503's Retry-After is when a lingering slot frees (attack120 F4).
func (s *Server) settleStream(x *exchange, d *Device, h *streamHold, over []*streamHold, status int) {
	if len(over) == 0 {
		return
	}
	freeing := slices.ContainsFunc(s.open.lingering(s.Now()), func(g *streamHold) bool { return !slices.Contains(over, g) })
	if status != http.StatusOK && (status != http.StatusServiceUnavailable || freeing) {
		s.open.restore(h, over)
		return
	}
	x.entry.Rule = ruleStreamShare
	for _, old := range over {
		old.end()
		s.Log.Info("logstream: the device's oldest open stream ended for its new one, past its share (max_streams)", "device", d.ID, "share", streamShare(d))
	}
}

// primaryFull is what a device's 503 from the primary for a stream says
// after the gateway's text, and its Retry-After, given the primary's
// (theirs). With no ended relay's slot lingering there, the primary's
// Retry-After is relayed; with one, the gateway knows when the first is
// freed: its Retry-After is the time until then, rounded up as a 429's,
// or the primary's if longer (attack119 F1: the primary's 5 s, followed,
// was refused twice), and the text names those streams and their devices:
// the shares fit the cap, but a reconnect from sleep counts its device's
// twice for upstreamSlotLinger (attack119 F2).
func (s *Server) primaryFull(theirs string) (text, retry string) {
	now := s.Now()
	gone := s.open.lingering(now)
	if len(gone) == 0 {
		return ": the primary serves no more streams now, its clients together (devices through this gateway, and any of its own) holding all of its MEMPALACE_SSE_MAX_CLIENTS (8 by default): retry later; if it lasts, the operator raises that cap to at least the sum of the devices' shares (max_streams)", theirs
	}
	secs := roundUpSecs(max(gone[0].freed.Sub(now), time.Second))
	if n, ok := retryAfterSecs(theirs, now); ok && n > secs {
		secs = n
	}
	var devices []string
	count := map[string]int{}
	for _, h := range gone {
		if count[h.device] == 0 {
			devices = append(devices, h.device)
		}
		count[h.device]++
	}
	for i, d := range devices {
		devices[i] = fmt.Sprintf("%s: %d", d, count[d])
	}
	return fmt.Sprintf(": the primary serves no more streams now, its clients together holding all of its MEMPALACE_SSE_MAX_CLIENTS (8 by default), counting the streams the gateway ended less than %s ago, whose slots it frees only then (%s); a device's reconnect from sleep ends its old streams for its new ones, so for those %s it holds twice its share: retry in %d s, when the first is freed; if it recurs, the operator raises that cap to the sum of the devices' shares with a reconnecting device's share counted twice (max_streams), or changes nothing: it clears within the wait",
		upstreamSlotLinger, strings.Join(devices, ", "), upstreamSlotLinger, secs), strconv.Itoa(secs)
}

// retryAfterSecs is the wait a Retry-After value asks from now, in
// whole seconds rounded up: its delay-seconds or its HTTP-date (RFC 9110
// allows both); false when it is neither (absent, or malformed).
func retryAfterSecs(v string, now time.Time) (int, bool) {
	if n, err := strconv.Atoi(v); err == nil {
		return n, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return roundUpSecs(at.Sub(now)), true
}

// roundUpSecs is d in whole seconds, rounded up (0 for d <= 0).
func roundUpSecs(d time.Duration) int {
	return int((max(d, 0) + time.Second - 1) / time.Second)
}

// recheckStreams ends each open relay whose token no longer
// authenticates (revoked, expired, rotated out past its grace, its device
// removed) or whose device's scope changed since it opened. The relay is
// ended rather than filtered under the new scope: the upstream's stream
// was asked for under the old one (a coordinator's unfiltered), and an
// event can no more be cut there than event_list's answer is re-cut. Its
// client reconnects, resuming with since_event_id, and is answered under
// the config now: 401, 403, or the stream its new scope allows.
func (s *Server) recheckStreams() {
	cfg, now := s.cfg.Load(), s.Now()
	for _, h := range s.open.all() {
		d, _, _, err := AuthenticateWith(cfg, s.state.firstUse, s.key, h.token, now)
		why := "its device's scope changed"
		switch {
		case err != nil:
			why = "its token no longer authenticates (revoked, expired, rotated out, or its device removed)"
		case d.header == h.scope:
			continue
		}
		s.open.remove(h)
		h.end()
		s.Log.Info("logstream: an open stream ended", "device", h.device, "why", why)
	}
}
