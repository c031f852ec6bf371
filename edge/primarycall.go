package edge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/ledger"
)

// maxPrimaryAnswer bounds one answer read from the primary.
const maxPrimaryAnswer = 64 << 20

// postable reports whether tool calls on s can be sent as plain JSON-RPC
// POSTs: a session of the initialize handshake (MemPalace's own server and
// today's SDKs). A stateless (2026-07-28) session needs the SDK's per-call
// _meta, so its calls go through the SDK.
func postable(s *mcp.ClientSession) bool {
	r := s.InitializeResult()
	return r != nil && r.ProtocolVersion != "" && r.ProtocolVersion < "2026-07-28"
}

// post sends one tools/call over the session the SDK opened (its
// Mcp-Session-Id and protocol version) and reads the answer, JSON or an
// event stream, without the SDK's decoding. Its errors read as the SDK's
// do to CallLong: the primary's JSON-RPC error as *jsonrpc.Error, an
// expired session as mcp.ErrSessionMissing, anything else a transport
// failure. A call given up (ctx) is cancelled on the primary, best effort.
func (p *Primary) post(ctx context.Context, s *mcp.ClientSession, params []byte) (json.RawMessage, error) {
	id := relayPrefix + strconv.FormatUint(p.next.Add(1), 10)
	var wrote atomic.Bool // the request left whole: the primary may have applied it
	var live atomic.Bool  // it was being written on a connection
	trace := &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { live.Store(true) },
		WroteRequest: func(w httptrace.WroteRequestInfo) { wrote.Store(w.Err == nil) },
	}
	givenUp := func() {
		if why := ctx.Err(); why != nil {
			p.goOwned(func() { p.cancelOnPrimary(s, id, why) })
		}
	}
	resp, err := p.send(httptrace.WithClientTrace(ctx, trace), s, wire.Request(id, "tools/call", params))
	if err != nil {
		givenUp()
		switch {
		case !wrote.Load() && live.Load() && timedOut(err):
			return nil, fmt.Errorf("tools/call: %w: %w: %w", outbox.ErrNotSent, errCutWriting, err)
		case !wrote.Load():
			return nil, fmt.Errorf("tools/call: %w: %w", outbox.ErrNotSent, err)
		}
		return nil, fmt.Errorf("tools/call: %w", err)
	}
	defer resp.Body.Close() // read to its end or abandoned: nothing to report
	p.sawLedger(resp.Header)
	if resp.StatusCode == http.StatusNotFound && s.ID() != "" {
		// an unknown session is refused before the call is read
		return nil, fmt.Errorf("the primary ended session %s: %w (%w)", s.ID(), mcp.ErrSessionMissing, outbox.ErrNotSent)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, statusError(resp, id)
	}
	var answer []byte
	body := &arriving{r: resp.Body}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "text/event-stream" { // a bad header reads as JSON, whose parse then says so
		answer, err = wire.ReadEventAnswer(resp.Body, id, p.o.maxAnswer)
	} else if answer, err = io.ReadAll(io.LimitReader(body, int64(p.o.maxAnswer)+1)); err == nil && len(answer) > p.o.maxAnswer {
		err = bufio.ErrTooLong
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("tools/call: %w: it is over the %s the edge reads of one answer (ask for less)", errPrimaryAnswerTooLarge, sizeWords(p.o.maxAnswer))
	}
	if err != nil {
		givenUp()
		if body.n > 0 && timedOut(err) {
			err = fmt.Errorf("%w: %w", errAnswerArriving, err)
		}
		return nil, fmt.Errorf("tools/call: reading the primary's answer: %w", err)
	}
	result, rpcErr, ok := wire.AnswerFor(answer, id)
	switch {
	case !ok:
		return nil, fmt.Errorf("tools/call: the primary's answer is not a JSON-RPC response to it")
	case rpcErr != nil:
		return nil, rpcErr
	}
	return result, nil
}

// statusError is a call's answer with a status not 2xx: the JSON-RPC
// error in its body, the primary's answer, or else the status.
func statusError(resp *http.Response, id string) error {
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusUnauthorized, http.StatusForbidden:
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20)) // a body cut short reads as no JSON-RPC error: the status stands
		if _, rpcErr, ok := wire.AnswerFor(body, id); ok && rpcErr != nil {
			return rpcErr
		}
	}
	return fmt.Errorf("tools/call: %w", &outbox.HTTPError{Status: resp.StatusCode})
}

// errPrimaryAnswerTooLarge: the primary answered a call with more than
// the edge reads of one answer, or a gateway refused to pass on its
// upstream's answer as over its own cap (answerOverCap): the primary is
// up; a read asked for less is answered (get_drawers asks in halves).
var errPrimaryAnswerTooLarge = errors.New("the primary's answer is too large")

// answerOverCap is a call's failure err if it is an answer over the
// edge's bound, or a gateway's 502 for a read whose upstream answer was
// over its cap (gateway/upstream.go, overWhat; why the gateway's words,
// bearer's peekWhy) as errPrimaryAnswerTooLarge; else nil. A write's
// 502 says it may have been applied, and is left to fail as one.
func answerOverCap(err error, why *answerWhy) error {
	if errors.Is(err, errPrimaryAnswerTooLarge) {
		return err
	}
	var st *outbox.HTTPError
	if why == nil || !why.gateway || !errors.As(err, &st) || st.Status != http.StatusBadGateway ||
		!strings.Contains(why.text, deviceinfo.ReadAskForLess) {
		return nil
	}
	return fmt.Errorf("%w: the gateway refused it (%s)", errPrimaryAnswerTooLarge, why.text)
}

// errCutWriting: a call's deadline passed while its request was still
// being written on a live connection (a body of megabytes on a slow
// link): not sent (its connection is reset), but the primary was reached.
var errCutWriting = errors.New("its time ran out while the request was still being written")

// errAnswerArriving: a call's deadline passed while the primary's JSON
// answer was arriving (a large answer over a slow link): the primary
// answered. An event stream's first bytes are not counted: a server may
// send an event before the call's answer, which can still hang.
var errAnswerArriving = errors.New("its time ran out while the primary's answer was still arriving (a large answer or a slow link; the primary answered)")

// arriving counts the bytes read of an answer.
type arriving struct {
	r io.Reader
	n int64
}

func (a *arriving) Read(b []byte) (int, error) {
	n, err := a.r.Read(b)
	a.n += int64(n)
	return n, err
}

func (p *Primary) send(ctx context.Context, s *mcp.ClientSession, msg []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", s.InitializeResult().ProtocolVersion)
	if sid := s.ID(); sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	return p.httpc.Do(req) // the bearer transport adds the token
}

// cancelOnPrimary tells the primary a call was given up.
func (p *Primary) cancelOnPrimary(s *mcp.ClientSession, id string, why error) {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	if resp, err := p.send(ctx, s, wire.Cancellation(id, why.Error())); err == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)) // best effort, as the cancellation itself
		resp.Body.Close()                                     // as above
	}
}

// sawLedger notes whether an answer came from a gateway with an op-id
// ledger (every /mcp answer of one carries ledger.Header).
func (p *Primary) sawLedger(h http.Header) { p.setLedger(ledger.Advertised(h)) }

// initLedger notes what a new session's initialize answer said (a
// gateway with a ledger announces it among its capabilities), so that a
// process knows before its first call whether a resend is answered from
// a ledger.
func (p *Primary) initLedger(s *mcp.ClientSession) {
	r, err := json.Marshal(s.InitializeResult())
	p.setLedger(err == nil && ledger.AdvertisedIn(r))
}

func (p *Primary) setLedger(on bool) {
	v := int32(2)
	if on {
		v = 1
	}
	if old := p.ledger.Swap(v); old != v && p.o.OnLedger != nil {
		p.o.OnLedger(on)
	}
}

// Ledger reports whether the primary is a gateway with an op-id ledger.
// Before any answer said, a session is opened to learn it (its
// initialize answer says); an error: still not known.
func (p *Primary) Ledger(ctx context.Context) (bool, error) {
	if v := p.ledger.Load(); v != 0 {
		return v == 1, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	if _, err := p.sessionFor(ctx); err != nil {
		return false, fmt.Errorf("whether the primary keeps an op-id ledger: %w", err)
	}
	if v := p.ledger.Load(); v != 0 {
		return v == 1, nil
	}
	return false, errors.New("whether the primary keeps an op-id ledger: its session said nothing yet")
}
