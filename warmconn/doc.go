// Package warmconn is the HTTP/1.1 transport to a server that closes every
// connection after its answer, as `mempalace serve` does: each call is
// written and read on the calling goroutine over a connection dialled
// ahead of it, so neither a TCP connect (and TLS handshake) nor net/http's
// per-connection goroutines sit on the answer's path. The edge uses it for
// its primary, the gateway for its upstream.
package warmconn
