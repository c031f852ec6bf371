package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"time"
)

// oneShot is the transport of tool calls to an http:// upstream: a
// connection of its own per call, closed with the answer. mempalace serve
// closes every connection after answering, so net/http's pooled transport
// pooled nothing here and cost a dial goroutine, a read loop and a write
// loop per call, each a hand-off between threads on the answer's path
// (BENCHMARKS.md, decision log). An https:// upstream (a proxy that keeps
// connections) goes through next.
// upstreamClient is the client of tool calls: one connection per call to
// an http:// upstream, next's for any other.
func upstreamClient(dialer *net.Dialer, next http.RoundTripper) *http.Client {
	return &http.Client{Timeout: callTimeout, Transport: &oneShot{dialer: *dialer, next: next}}
}

type oneShot struct {
	dialer net.Dialer
	next   http.RoundTripper
}

func (o *oneShot) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return o.next.RoundTrip(req)
	}
	ctx := req.Context()
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	conn, err := o.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	// A cancelled call unblocks the write or read below.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	bw := bufio.NewWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if t := httptrace.ContextClientTrace(ctx); t != nil && t.WroteRequest != nil {
		t.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(bufio.NewReader(conn), req)
	}
	if err != nil {
		stop()
		conn.Close() // the call failed: its error is the one to report
		return nil, err
	}
	resp.Body = &connBody{ReadCloser: resp.Body, conn: conn, stop: stop}
	return resp, nil
}

// connBody closes the call's connection with the answer's body.
type connBody struct {
	io.ReadCloser
	conn net.Conn
	stop func() bool
}

func (b *connBody) Close() error {
	b.stop()
	b.ReadCloser.Close() // the connection's close below is what frees it
	return b.conn.Close()
}
