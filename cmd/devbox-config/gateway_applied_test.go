package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
)

// A config change says whether the running gateway took it (attack83
// F10: `device remove` said "its tokens stop working within a second"
// while the gateway had refused the new config and kept the removed
// device's tokens working). A refusal the gateway records is the
// command's error, exit 3, with the gateway's reason and that the old
// config stays in force; it printed the usual message and exited 0
// before.
func TestAChangeTheRunningGatewayRefusedIsReported(t *testing.T) {
	cfg, _ := gatewayWithDevice(t, "--read", "shared", "--write", "shared")
	srv := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:9/mcp", BindHost: "127.0.0.1"}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	before, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- removeDevice(&gatewayConfig{file: cfg, wait: 10 * time.Second}, &out, "laptop-7f3a") }()
	// The gateway's reload, once the command has written the file, meets
	// a state file it cannot read, and refuses the change.
	for c, err := gateway.LoadConfig(cfg); err != nil || c.Device("laptop-7f3a") != nil; c, err = gateway.LoadConfig(cfg) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(gateway.StateFile(cfg, before), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if srv.Reload() == nil {
		t.Fatal("the gateway took the change")
	}
	err = <-done
	ee, ok := errors.AsType[exitError](err)
	if !ok || ee.code != exitNotInForce {
		t.Fatalf("device remove under a gateway that refused it: %v (exit %d), said %q", err, ee.code, out.String())
	}
	for _, want := range []string{"refused", "STILL WORKS", "state_file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if out.Len() > 0 {
		t.Errorf("it still says %q", out.String())
	}
}

// With no gateway running a change says what it always said, at once; an
// older gateway (it holds the audit log's lock and records nothing) is
// named as one that has not confirmed the change, exit 3, and a token
// issued under it is still shown (it is in the file).
func TestAChangeSaysWhenNoGatewayConfirmedIt(t *testing.T) {
	cfg, _ := gatewayWithDevice(t, "--read", "shared", "--write", "shared")
	start := time.Now()
	if out, _ := gatewayCLI(t, cfg)(0, "token", "revoke", "laptop-7f3a"); out != "revoked 1 token(s)\n" || time.Since(start) > time.Second {
		t.Fatalf("with no gateway running: %q after %s", out, time.Since(start))
	}

	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(c.AuditLog+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	g := &gatewayConfig{file: cfg, wait: 50 * time.Millisecond}
	var out, errOut bytes.Buffer
	err = issueToken(g, &out, &errOut, "laptop-7f3a", false)
	if ee, ok := errors.AsType[exitError](err); !ok || ee.code != exitNotInForce {
		t.Fatalf("token issue under an older gateway: %v", err)
	}
	for _, want := range []string{"has not confirmed", "older than this release", "device list"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if tok := strings.TrimSpace(out.String()); !strings.HasPrefix(tok, gateway.TokenPrefix+"_") || errOut.Len() > 0 {
		t.Errorf("the token issued is not shown (it is in the file): %q, %q", out.String(), errOut.String())
	}
}

// watchGateway runs srv's Watch, as a running gateway does (it reloads a
// changed config and records it), until stop, which waits for it: call it
// before srv.Close.
func watchGateway(srv *gateway.Server) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Watch(ctx) }()
	return func() { cancel(); <-done }
}
