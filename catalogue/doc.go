// Package catalogue is the one place that knows MemPalace's tools.
//
// Every tool of the reference surface (3.6.0 to the latest dev schema) has
// one record here: how the edge routes it (RFC 001 §4.2), whether it reads
// or writes, how to find the wing(s) it touches from its arguments, how the
// outbox replays it safely (RFC 001 §4.3, §4.4, §7.6; RFC 003 §7.1), which
// arguments MemPalace accepts, and what the gateway requires to let it
// through and which answer shape it filters (RFC 001 §6).
//
// The edge's router, its fast lane, the outbox's replay and the gateway's
// authorization all read it; none of them keeps a tool table of its own.
// A tool the catalogue does not know is a write to the edge (treating an
// unclassified tool as a read would silently drop a write, as upstream's
// classify_tool does with kg_supersede) and is denied by the gateway.
package catalogue
