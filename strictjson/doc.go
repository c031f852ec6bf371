// Package strictjson reads JSON the way a reader can trust it to mean
// the same to any parser: Go's encoding/json and Python's json (MemPalace)
// read the same bytes alike only when they hold no key twice in an
// object, no two keys differing only in case (Go matches struct fields
// case-insensitively, Python does not; both keep a duplicate's last),
// nesting at most MaxDepth, no number beyond a float64 (1e400: Python's
// inf), valid UTF-8 and no escape of a lone surrogate (\ud800: Go reads
// U+FFFD, Python keeps the surrogate). The gateway parses every request
// with it; the edge reads a call's arguments with it (DecodeArguments: at
// the depth and path they have in the request, ArgumentsDepth), so it
// refuses up front exactly what the gateway would refuse. DecodeEnvelope
// reads a request with its params passed over, so that a refusal of the
// params the parse stopped in (MaxValues) still answers the request's id.
//
// It is not package jsondepth: that one guards a recursive reader of a
// peer's JSON (a bound of 10000, nothing else refused); this one decides
// what JSON means, and refuses what parsers read differently.
package strictjson
