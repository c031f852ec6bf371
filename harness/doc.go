// Package harness holds one record per coding agent that render writes a
// MemPalace entry for: where its user-level config lives, its format
// (JSON, JSONC, TOML, YAML), the key path of its MCP map, the entry for
// each rung of the ladder, how it references an environment variable in
// a header, and its traps.
//
// render and doctor read the records (All, ByName); nothing else in the
// tree changes per harness. Adding a harness is one record here, one
// golden in testdata/render and, where a client runs offline, one
// real-client case in render/harness_clients_test.go. docs/harnesses.md
// is the table a person reads.
package harness
