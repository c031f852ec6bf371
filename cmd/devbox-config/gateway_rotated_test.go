package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
)

// A gateway whose audit log was rotated away (mv, as operator.md's
// logrotate recipe does) while it was stopped starts, and chains on from
// audit.jsonl.1: the two verify as one log (attack79 F2: it refused to
// start, calling the log lost, and both fixes it offered broke the chain).
func TestGatewayStartsAfterItsLogWasRotatedWhileStopped(t *testing.T) {
	t.Parallel()
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	log := filepath.Join(filepath.Dir(cfg), "audit", "audit.jsonl")
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckKept(cfg); err != nil {
		t.Fatalf("refused after a rotation: %v", err)
	}
	serveOnce(t, cfg, token)
	if out, _ := gatewayCLI(t, cfg)(0, "audit", "verify", log+".1", log); !strings.Contains(out, "chain intact") {
		t.Fatalf("the rotated file and the new one: %s", out)
	}
}

// A gateway that has served, whose audit log is an empty file with no
// rotated file beside it, refuses to start (it would begin a new chain,
// silently), naming the rotated file to put back.
func TestGatewayRefusesAnEmptyAuditLog(t *testing.T) {
	t.Parallel()
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	log := filepath.Join(filepath.Dir(cfg), "audit", "audit.jsonl")
	if err := os.Truncate(log, 0); err != nil {
		t.Fatal(err)
	}
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckKept(cfg)
	for _, want := range []string{log + " (the hash-chained record of every request) is empty, 0 bytes", "audit.jsonl.1", "--new-state"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("an empty audit log: %v, want %q", err, want)
		}
	}
}

// A gateway that has served, whose audit log is gone, refuses to start
// beside a rotated file with no audit line in it (touched, or a .1.gz of
// something else), as beside none (attack81 F3: it started a new chain
// at genesis, saying it went on from the rotated file).
func TestGatewayRefusesARotatedFileWithNoAuditLine(t *testing.T) {
	t.Parallel()
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	log := filepath.Join(filepath.Dir(cfg), "audit", "audit.jsonl")
	if err := os.Rename(log, log+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log+".1", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckKept(cfg)
	for _, want := range []string{log + " (the hash-chained record of every request) does not exist", "--new-state"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("an empty rotated file: %v, want %q", err, want)
		}
	}
}
