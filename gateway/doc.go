// Package gateway is `devbox-config gateway`: per-device authorization in
// front of a MemPalace primary (RFC 001 Phase 4, §6.2, §7.3.2). Each device
// has its own token; every request is authorized by wing, knowledge-graph
// grant, coordination identity and admin scope; provenance is stamped from
// the credential; every decision is written to a hash-chained audit log.
// The upstream `mempalace serve` is unchanged and sees one shared token.
package gateway
