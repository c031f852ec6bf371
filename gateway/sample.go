package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/joakimp/devbox-config/shellword"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// sampleConfig is what `gateway init` writes: every field the gateway
// reads, explained, with one example device commented out. Its paths are
// relative (to the config file's directory), so the files sit beside it and
// move with it.
const sampleConfig = `// devbox-config gateway configuration (JSONC: comments and trailing commas
// are allowed). Written by 'devbox-config gateway init'. The gateway reloads
// it within a second of a change, and on SIGHUP.
//
// 'gateway device add|remove' and 'gateway token issue|rotate|revoke' edit
// this file for you; they rewrite it as plain JSON, so these comments go
// with the first such edit. A relative path is relative to the directory this
// file is in, so the gateway's directory can be moved or copied whole; an
// absolute path is used as it is.
{
  // The server secret that keys the token HMACs: created (0600) on first use
  // if it does not exist. Losing it invalidates every issued token, so with
  // tokens issued and no secret, the gateway and 'token issue' refuse to run
  // until it is restored from backup (or every token is revoked). Back it up.
  "secret_file": DIR_SECRET,

  // The upstream's shared token (mempalace serve's MEMPALACE_MCP_HTTP_TOKEN),
  // 0600. MEMPALACE_UPSTREAM_TOKEN in the environment wins over this file.
  // "upstream_token_file": DIR_UPSTREAM,

  // Append-only, hash-chained audit log: one JSON line per request, in a
  // directory of its own (created 0700), away from the signing key below.
  // The op-id ledger and the trash go beside it by default.
  "audit_log": DIR_AUDIT,

  // Ed25519 key that signs checkpoints of the audit chain (created if
  // missing; the public half is <file>.pub, which 'audit verify' reads).
  // Kept here, beside the secret, and not in the log's directory: whoever
  // can rewrite the log and read this key could sign a rewritten log.
  "signing_key_file": DIR_SIGNING,

  // A signed checkpoint every audit_checkpoint_lines lines (default 100) and
  // audit_checkpoint_seconds (default 60) after a line none covers yet, and
  // when the gateway stops. Each is also written to audit_anchor: "stderr"
  // (the service manager's journal) or a file outside the log's directory
  // (another disk, another owner); 'audit verify --anchor' then catches a
  // log whose end was cut.
  "audit_anchor": "stderr",
  // "audit_checkpoint_lines": 100,
  // "audit_checkpoint_seconds": 60,

  // Every delete through the gateway keeps what it removes in the trash
  // ('gateway trash list|restore|prune'): trash.sqlite beside the audit log
  // unless trash_file says otherwise, kept trash_retention_days (default 30).
  // One delete may remove at most delete_cap drawers (default 10) unless the
  // device has "bulk_delete": true ('gateway device set ID --bulk-delete').
  // "trash_file": "/var/lib/devbox-gateway/trash.sqlite",
  // "trash_retention_days": 30,
  // "delete_cap": 10,

  // The instruction wing: instructions every agent in the fleet may act on
  // (conventions, runbooks, "always run the tests before a release"). Every
  // device reads it; only admin devices whose write globs match it ("*"
  // does) write it, so no single laptop can plant an instruction the whole
  // fleet reads as trusted memory. Remove the line to have none.
  "instruction_wing": "wing_instructions",

  // Who wrote every record, for the "origin" each record of an answer
  // carries: provenance.sqlite beside the audit log unless this says
  // otherwise. Never pruned.
  // "provenance_file": "/var/lib/devbox-gateway/provenance.sqlite",

  // How long a rotated-out token stays valid after its successor's first
  // use, in days (default 7).
  // "grace_days": 7,

  // The op-id ledger: every write an edge's outbox resends reaches
  // MemPalace once (default: op-ledger.sqlite beside the audit log), and
  // how many days an op id is remembered (default 7).
  // "ledger_file": "/var/lib/devbox-gateway/op-ledger.sqlite",
  // "ledger_retention_days": 7,

  // Each device has its own token. Add one with
  //   devbox-config gateway --config THIS_FILE device add laptop-7f3a --label laptop \
  //     --read 'shared,wing_opencode' --write 'shared,wing_opencode' --kg write --agents opencode@laptop
  // then (shown once)
  //   devbox-config gateway --config THIS_FILE token issue laptop-7f3a
  // (--config can be left out where this file is ./gateway.jsonc).
  //
  // A device may name the devices it trusts, "trusts": ["ops-0001"] (its own
  // records always): records any other device wrote, or that were written
  // before or around the gateway, then say "trusted": false in their origin,
  // or are left out of its answers with "untrusted": "withhold". Without
  // "trusts" it trusts every device. 'gateway device set ID --trusts IDS
  // [--untrusted withhold]' sets them. Deny by default:
  "devices": [
    // {
    //   "id": "laptop-7f3a",              // opaque, 1-64 of letters, digits, . _ -
    //   "label": "laptop",                // for humans only, never identity
    //   "read": ["shared", "wing_opencode"],   // wing globs it may read
    //   "write": ["shared", "wing_opencode"],  // wing globs it may write
    //   "kg": "read",                     // knowledge graph: none, read or write
    //   "agents": ["opencode@laptop"],    // from_agent names it may use: <name>@<its label>
    //   "admin": false,                   // deletes (kept in the trash), reconnect, hook settings; never sync or mine
    //   "bulk_delete": false,             // an admin's delete of more than delete_cap drawers
    //   "coordinator": false,             // sees every coordination event
    //   "read_rate": 0, "write_rate": 0,  // requests per second; 0 = defaults
    //   "max_streams": 0                  // open /logstream/stream at once; 0 = one per agent, at least 2
    // }
  ]
}
`

// SampleConfig returns the commented sample configuration for a config file
// at path: the secret and the audit log's signing key beside it, the audit
// log in audit/ below it.
func SampleConfig(path string) ([]byte, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	quote := func(name string) string {
		b, _ := json.Marshal(name) // a string: it encodes
		return string(b)
	}
	r := strings.NewReplacer(
		"DIR_SECRET", quote("gateway.secret"),
		"DIR_UPSTREAM", quote("upstream.token"),
		"DIR_AUDIT", quote(filepath.Join("audit", "audit.jsonl")),
		"DIR_SIGNING", quote("audit-signing.key"),
		"THIS_FILE", shellword.Quote(abs),
	)
	return []byte(r.Replace(sampleConfig)), nil
}

// WriteSample creates the sample configuration at path with mode 0600 (it
// will hold token HMACs), and its missing parent directories with mode 0700
// (the secret and the audit log go beside it). It refuses to touch an
// existing file.
func WriteSample(path string) error {
	b, err := SampleConfig(path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("gateway config %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; not overwritten (edit it, or remove it first)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()       // the write's error is the one to report
		os.Remove(path) // a half-written sample is removed if it can be
		return err
	}
	if err := f.Chmod(0o600); err != nil { // umask must not widen or narrow it
		f.Close() // the chmod's error is the one to report
		return err
	}
	return f.Close()
}
