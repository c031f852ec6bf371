// Package render makes each harness config say what the MEMPALACE_*
// environment says (RFC 001 Phase 1.5), without ever destroying a user's
// own edit.
//
// A run has two steps. Plan only reads: it decides, per target, what the
// files should become and returns the changes as before/after bytes. Apply
// is the only writer, through a System. --dry-run is a plan that is printed
// instead of applied, so what a dry run shows is exactly what a real run
// writes.
//
// A plan per managed entry (managed.go) is decide, which reads the record
// and the .proposed sidecar and applies merge.Decide, then describe, which
// turns that decision into the changes. The user's config may be a link
// (the real file is written, the link stays); render's own files (the
// .proposed sidecar, the .devbox-config.json record, the backups) are
// never read or written through a link: a symlink there skips the target
// with a warning naming it (readOwn, System.WriteOwn).
package render
