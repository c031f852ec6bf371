package gateway

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// anchored is a gateway that signs its audit log and writes each anchor
// to stderr (a buffer here).
func anchored(t *testing.T) (*gw, *bytes.Buffer) {
	t.Helper()
	g := newGW(t, devices)
	dir := t.TempDir()
	var stderr bytes.Buffer
	if _, err := UpdateConfig(g.cfgFile, func(c *Config) error {
		c.SigningKeyFile, c.AuditAnchor, c.AuditCheckpointLines = filepath.Join(dir, "audit.key"), AnchorStderr, 1000
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	g.srv.Close()
	g.srv.Stderr = &stderr
	if err := g.srv.Open(); err != nil {
		t.Fatal(err)
	}
	return g, &stderr
}

// Lines no checkpoint covers are signed once they have waited the
// interval (default a minute), and when the gateway stops; each
// checkpoint's anchor goes to the second place, here the journal.
func TestCheckpointByTimeAndAtClose(t *testing.T) {
	t.Parallel()
	g, stderr := anchored(t)
	cfg := g.srv.cfg.Load()
	pub, err := PublicKey(cfg.SigningKeyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		g.call(g.tokens["laptop-7f3a"], "status", nil)
	}
	g.advance(30 * time.Second)
	g.srv.audit.CheckpointIfDue()
	if r, _ := VerifyLog([]string{cfg.AuditLog}, pub, nil); r.Checkpoint != 0 || r.Unsigned != 3 {
		t.Fatalf("signed before the interval: %+v", r)
	}
	g.advance(31 * time.Second)
	g.srv.audit.CheckpointIfDue()
	r, err := VerifyLog([]string{cfg.AuditLog}, pub, nil)
	if err != nil || r.Checkpoint != 4 || r.Unsigned != 0 {
		t.Fatalf("after the interval: %+v %v", r, err)
	}
	g.srv.audit.CheckpointIfDue() // nothing new: no empty checkpoint
	if r, _ := VerifyLog([]string{cfg.AuditLog}, pub, nil); r.Lines != 4 {
		t.Fatalf("a checkpoint of nothing: %+v", r)
	}
	// The anchor in the journal checks the log.
	journal := filepath.Join(t.TempDir(), "journal.txt")
	os.WriteFile(journal, append([]byte("Nov 30 12:01:01 host devbox-config[77]: "), stderr.Bytes()...), 0o600)
	anchors, err := ReadAnchors(journal)
	if err != nil || len(anchors) != 1 || anchors[0].Lines != 4 || anchors[0].Log != cfg.AuditLog {
		t.Fatalf("the journal's anchors: %+v %v", anchors, err)
	}
	// One more line, then the gateway stops: the line is signed.
	g.call(g.tokens["laptop-7f3a"], "status", nil)
	g.srv.Close()
	r, err = VerifyLog([]string{cfg.AuditLog}, pub, anchors)
	if err != nil || r.Lines != 6 || r.Checkpoint != 6 {
		t.Fatalf("after stopping: %+v %v", r, err)
	}
	// Cut below the journal's anchor.
	b, _ := os.ReadFile(cfg.AuditLog)
	lines := strings.SplitAfter(string(b), "\n")
	os.WriteFile(cfg.AuditLog, []byte(strings.Join(lines[:3], "")), 0o600)
	if _, err := VerifyLog([]string{cfg.AuditLog}, pub, anchors); !errors.Is(err, ErrCut) {
		t.Fatalf("a log cut below its anchor: %v", err)
	}
}

// A request whose JSON-RPC method is "checkpoint" is audited like any
// other: it is not taken for a checkpoint, so it cannot make a signed log
// fail verification (it could, when checkpoints were told by method).
func TestACheckpointMethodIsNotACheckpoint(t *testing.T) {
	t.Parallel()
	g, _ := anchored(t)
	cfg := g.srv.cfg.Load()
	req, _ := http.NewRequest("POST", g.http.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"checkpoint"}`))
	req.Header.Set("Authorization", "Bearer "+g.tokens["laptop-7f3a"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	g.srv.Close()
	pub, _ := PublicKey(cfg.SigningKeyFile + ".pub")
	r, err := VerifyLog([]string{cfg.AuditLog}, pub, nil)
	if err != nil || r.Lines != 2 || r.Checkpoint != 2 {
		t.Fatalf("a log with a request named checkpoint: %+v %v", r, err)
	}
	// Reopened, the log knows where its last checkpoint is.
	a, err := OpenAudit(cfg.AuditLog, nil)
	if err != nil || a.since != 0 || a.lines != 2 {
		t.Fatalf("reopened: since %d, lines %d, %v", a.since, a.lines, err)
	}
}

// An anchor that cannot be written is logged, and refuses nothing: the
// log and its checkpoint are on disk.
func TestUnwritableAnchorRefusesNothing(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	dir := t.TempDir()
	gone := filepath.Join(dir, "gone")
	if _, err := UpdateConfig(g.cfgFile, func(c *Config) error {
		c.SigningKeyFile, c.AuditAnchor, c.AuditCheckpointLines = filepath.Join(dir, "audit.key"), filepath.Join(gone, "anchor"), 1
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	g.srv.Close()
	var logged bytes.Buffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	if err := g.srv.Open(); err != nil {
		t.Fatal(err)
	}
	if res, rpc, _ := g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "written whatever the anchor"}); rpc != nil || res["success"] != true {
		t.Fatalf("a write with the anchor's directory missing: %v %v", res, rpc)
	}
	if !strings.Contains(logged.String(), "audit anchor not written") {
		t.Fatalf("not logged: %s", logged.String())
	}
}
