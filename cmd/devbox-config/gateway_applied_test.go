package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
)

// A config change says whether the running gateway took it (attack83
// F10: `device remove` said "its tokens stop working within a second"
// while the gateway had refused the new config and kept the removed
// device's tokens working). A refusal the gateway records is the
// command's error, exit 3, with the gateway's reason and that the old
// config stays in force; it printed the usual message and exited 0
// before.
func TestAChangeTheRunningGatewayRefusedIsReported(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// Two config commands at once: the gateway reads the file once, after
// both wrote it, and records the later config's bytes. Both changes are
// in force, and both commands say so; the first exited 3 and blamed "a
// gateway older than this release" before (attack85 F3).
func TestTwoChangesAtOnceAreBothConfirmed(t *testing.T) {
	t.Parallel()
	cfg, _ := gatewayWithDevice(t, "--read", "shared", "--write", "shared")
	gatewayCLI(t, cfg)(0, "device", "add", "desk-0002", "--read", "shared")
	srv := openGateway(t, cfg)
	defer srv.Close()

	remove := func(id string) (<-chan error, *bytes.Buffer) {
		var out bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- removeDevice(&gatewayConfig{file: cfg, wait: 10 * time.Second}, &out, id) }()
		waitFor(t, cfg, func(c *gateway.Config) bool { return c.Device(id) == nil })
		return done, &out
	}
	first, out1 := remove("laptop-7f3a")
	time.Sleep(50 * time.Millisecond) // the first command waits for its record
	second, out2 := remove("desk-0002")
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	for i, r := range []struct {
		done <-chan error
		out  *bytes.Buffer
	}{{first, out1}, {second, out2}} {
		if err := <-r.done; err != nil || !strings.Contains(r.out.String(), "within a second") {
			t.Errorf("command %d: %v, said %q", i+1, err, r.out.String())
		}
	}
}

// After a refusal, the command run again once its cause is corrected (a
// state file the gateway's user may not read) waits for the gateway to
// read the file it wrote, and says it took it; `device list` meanwhile
// says the gateway enforces another config. The run again reported the
// stale refusal at once, and the list said nothing, before (attack85
// F12).
func TestARerunAfterARefusalIsNotAnsweredByTheOldRecord(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the gateway reads as another user than the command: needs root")
	}
	cfg, _ := gatewayWithDevice(t, "--read", "shared", "--write", "shared")
	srv := openGateway(t, cfg)
	defer srv.Close()
	if err := os.Chmod(filepath.Dir(cfg), 0o777); err != nil { // the gateway's user writes its record
		t.Fatal(err)
	}
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	state := gateway.StateFile(cfg, c)
	revoke := func() (string, error) {
		var out bytes.Buffer
		done := make(chan error, 1)
		fi, _ := os.Stat(cfg)
		go func() {
			done <- revokeTokens(&gatewayConfig{file: cfg, wait: 10 * time.Second}, &out, "laptop-7f3a", "")
		}()
		for now, _ := os.Stat(cfg); now.ModTime().Equal(fi.ModTime()); now, _ = os.Stat(cfg) {
			select {
			case err := <-done:
				t.Fatalf("the command answered before the gateway read its write: %v", err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		time.Sleep(50 * time.Millisecond) // the command waits for its record
		// The gateway as its own user: it may not read a state file of 0600
		// that is not its own. Its error is in the record.
		testbed.AsOtherUser(t, cfg, func() error { return srv.Reload() }) // its error is the record's
		err := <-done
		return out.String(), err
	}
	if err := os.Chmod(state, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := revoke(); !strings.Contains(fmt.Sprint(err), "refused") || !strings.Contains(fmt.Sprint(err), "state_file") {
		t.Fatalf("a change the gateway refused: %v", err)
	}
	var list bytes.Buffer
	if err := listDevices(&gatewayConfig{file: cfg, wait: time.Millisecond}, io.Discard, &list); err != nil || !strings.Contains(list.String(), "refused this file") {
		t.Errorf("device list under a refusal: %v, warned %q", err, list.String())
	}

	if err := os.Chmod(state, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := revoke(); err != nil || !strings.HasPrefix(out, "revoked ") {
		t.Errorf("run again once the cause is corrected: %v, said %q", err, out)
	}
}

// An operator who may write the config but not read the gateway's lock
// (its audit directory is its own) is told the command cannot tell
// whether the change is in force, exit 3, with the file, the permission
// and where to check. It said "no gateway runs" (its tokens stop working
// within a second, exit 0) before (attack85 F1).
func TestAChangeWhoseGatewayCannotBeSeenIsNotPromised(t *testing.T) {
	t.Parallel()
	cfg, _ := gatewayWithDevice(t, "--read", "shared", "--write", "shared")
	srv := openGateway(t, cfg)
	defer srv.Close()
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(c.AuditLog+".lock", 0); err != nil {
		t.Fatal(err)
	}
	g := &gatewayConfig{file: cfg, wait: time.Millisecond}
	err = testbed.AsOtherUser(t, cfg, func() error { return g.confirm(time.Now(), true, nil) })
	ee, ok := errors.AsType[exitError](err)
	if !ok || ee.code != exitNotInForce {
		t.Fatalf("a gateway this user cannot see: %v", err)
	}
	for _, want := range []string{c.AuditLog + ".lock", "permission denied", "gateway's user", "device list", "gateway's log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

// openGateway is an in-process gateway on cfg, which reloads only when
// the test says (srv.Reload); the caller closes it.
func openGateway(t *testing.T, cfg string) *gateway.Server {
	t.Helper()
	srv := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:9/mcp", BindHost: "127.0.0.1"}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	return srv
}

// waitFor waits until cfg's file says ok.
func waitFor(t *testing.T, cfg string, ok func(*gateway.Config) bool) {
	t.Helper()
	for c, err := gateway.LoadConfig(cfg); err != nil || !ok(c); c, err = gateway.LoadConfig(cfg) {
		time.Sleep(5 * time.Millisecond)
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
