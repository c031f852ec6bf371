package gateway

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
)

// An event_list page the filter cut (events between other agents, for a
// device that does not coordinate; events from senders it withholds) is
// filled: the gateway reads the upstream on from its own cursor (the
// last event of the upstream's page, seen or not) until the page holds
// limit events the device sees or the upstream's page is short, so that
// a page shorter than limit is the end of the log for every client, as
// it is upstream. The reading is bounded (eventScanMax events, fillWait);
// a fill the bound stopped answers "more": true and "next_cursor", a
// cursor sealed to the device that since_event_id (oldest first) or
// before_event_id (newest first) accepts, which names the hidden event
// to the gateway alone.

const (
	// eventScanMax bounds the events one fill reads upstream.
	eventScanMax = 10000
	// fillWait bounds one fill's upstream reading.
	fillWait = 20 * time.Second
	// cursorPrefix begins a cursor the gateway sealed.
	cursorPrefix = "evc_"
)

// listCursors are event_list's cursor arguments (event_wait has the first).
var listCursors = []string{"since_event_id", "before_event_id"}

// openCursors replaces a sealed cursor (next_cursor) in an event_list's or
// event_wait's arguments with the event it names; issued is the arguments that held
// one (its event may be hidden from the device, the page after it is
// still its to read; the other cursor argument is checked as ever). A
// cursor that does not open for this device is answered as the upstream
// answers an unknown one (bad, not nil).
func (s *Server) openCursors(d *Device, req *rpcRequest) (issued []string, bad map[string]any) {
	for _, k := range listCursors {
		c, _ := req.Args[k].(string)
		if !strings.HasPrefix(c, cursorPrefix) {
			continue
		}
		id, ok := s.unsealCursor(d, c)
		if !ok {
			return nil, map[string]any{"error": fmt.Sprintf("%s %q not found", k, c)}
		}
		req.Args[k], issued = id, append(issued, k)
	}
	return issued, nil
}

// fillPage is event_list's answer out (filtered from the upstream's page
// resp) filled to the request's limit from the pages after it (see
// above); out as it is when nothing was cut or the upstream's page was
// short.
func (s *Server) fillPage(ctx context.Context, d *Device, t catalogue.Tool, dec Decision, req *rpcRequest, resp, out []byte) []byte {
	limit := min(max(numArg(req.Args, "limit", 50), 1), 500)
	raw, _ := resultOf(resp)["events"].([]any)
	m := resultOf(out)
	evs, ok := m["events"].([]any)
	if !ok || m["error"] != nil || len(evs) >= limit || len(raw) < limit {
		return out
	}
	args, cursorKey, ok := s.fillArgs(ctx, req.Args)
	if !ok {
		return out // which way the page runs is not known: as it came
	}
	ctx, cancel := context.WithTimeout(ctx, fillWait)
	defer cancel()
	f := fill{s: s, d: d, t: t, dec: dec, req: req, args: args, cursorKey: cursorKey,
		m: m, evs: evs, raw: raw, withheld: int(num(m["untrusted_withheld"]))}
	f.readOn(ctx, limit)
	m["events"], m["count"] = f.evs, len(f.evs)
	if f.withheld > 0 {
		m["untrusted_withheld"] = f.withheld
	}
	return textAnswer(req.rawID(), m)
}

// fillArgs are the arguments of the upstream reads that fill a page: the
// request's, in the order its page runs (oldest first, where the upstream
// has no order or a since_event_id is given), a page of 500 at a time, and
// the cursor argument that reads on that way.
func (s *Server) fillArgs(ctx context.Context, reqArgs map[string]any) (args map[string]any, cursorKey string, ok bool) {
	params, err := s.eventListParams(ctx)
	if err != nil {
		return nil, "", false
	}
	args = maps.Clone(reqArgs)
	order := strings.ToLower(strings.TrimSpace(str(args["order"])))
	if order == "" && (!params["order"] || str(args["since_event_id"]) != "") {
		order = "asc"
	}
	cursorKey = "since_event_id"
	if order != "asc" {
		order, cursorKey = "desc", "before_event_id"
	}
	if params["order"] {
		args["order"] = order
	}
	args["limit"] = 500
	return args, cursorKey, true
}

// fill is one page being filled: the events the device sees so far, the
// upstream's last page (raw: its last event is the cursor read on from)
// and the count withheld.
type fill struct {
	s         *Server
	d         *Device
	t         catalogue.Tool
	dec       Decision
	req       *rpcRequest
	args      map[string]any
	cursorKey string
	m         map[string]any
	evs, raw  []any
	withheld  int
}

// readOn reads the upstream's pages after the last one read until the
// page holds limit events, the upstream's page is short, or the bound
// stops it (then the answer says more, with a sealed next_cursor).
func (f *fill) readOn(ctx context.Context, limit int) {
	scanned, scan := 0, int(f.s.eventScan.Load())
	if scan <= 0 {
		scan = eventScanMax
	}
	for len(f.evs) < limit {
		last, _ := f.raw[len(f.raw)-1].(map[string]any)
		cursor := str(last["id"])
		if cursor == "" {
			return
		}
		if scanned >= scan || ctx.Err() != nil {
			f.m["more"], f.m["next_cursor"] = true, f.s.sealCursor(f.d, cursor)
			return
		}
		f.args[f.cursorKey] = cursor
		status, page := f.s.upstreamCall(ctx, toolCall(f.req.rawID(), f.req.Tool, f.args))
		next, err := f.s.filterAnswer(ctx, f.d, f.t, f.dec, f.req.rawID(), page)
		pm := resultOf(next)
		got, listed := pm["events"].([]any)
		if status != http.StatusOK || err != nil || !listed || pm["error"] != nil {
			f.m["more"], f.m["next_cursor"] = true, f.s.sealCursor(f.d, cursor) // not read now: from here next time
			return
		}
		f.evs = append(f.evs, got[:min(len(got), limit-len(f.evs))]...)
		f.withheld += int(num(pm["untrusted_withheld"]))
		f.raw, _ = resultOf(page)["events"].([]any)
		scanned += len(f.raw)
		if len(f.raw) < 500 {
			return
		}
	}
}

// cursorAEAD seals cursors with a key derived from the gateway's secret.
func (s *Server) cursorAEAD() cipher.AEAD {
	k := sha256.Sum256(append([]byte("devbox-config gateway event cursor\x00"), s.key...))
	b, _ := aes.NewCipher(k[:]) // a 32-byte key: no error
	a, _ := cipher.NewGCM(b)    // a block cipher of AES's size: no error
	return a
}

// sealCursor is event id as a cursor only the gateway reads, for d alone.
func (s *Server) sealCursor(d *Device, id string) string {
	a := s.cursorAEAD()
	nonce := make([]byte, a.NonceSize())
	rand.Read(nonce) // crypto/rand does not fail (Go 1.24)
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(a.Seal(nonce, nonce, []byte(id), []byte(d.ID)))
}

// unsealCursor is the event id sealCursor sealed for d in c.
func (s *Server) unsealCursor(d *Device, c string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(c, cursorPrefix))
	a := s.cursorAEAD()
	if err != nil || len(b) < a.NonceSize() {
		return "", false
	}
	id, err := a.Open(nil, b[:a.NonceSize()], b[a.NonceSize():], []byte(d.ID))
	return string(id), err == nil
}
