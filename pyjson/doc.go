// Package pyjson writes JSON as MemPalace re-encodes what it stores:
// Python's json.dumps(value, ensure_ascii=False, sort_keys=True), with ", "
// between items and ": " after keys, non-ASCII characters as they are,
// control characters escaped as Python escapes them, keys sorted, and
// numbers as Python reads and writes them (an integer as written, "-0" as
// 0; a number with a fraction or an exponent as a float's repr: 1e5 is
// 100000.0, 1e16 is 1e+16). MemPalace caps an event's and an artifact's
// metadata by that text's UTF-8 bytes (logstream.py _sanitize_metadata),
// not by the bytes the agent wrote, so the edge measures it here.
//
// It takes the values strictjson.Decode gives (numbers as json.Number):
// JSON that strictjson refuses (a number beyond a float64, a lone
// surrogate) has no place here.
package pyjson
