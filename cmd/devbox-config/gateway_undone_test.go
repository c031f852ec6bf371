package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// A hand save from a copy of the file opened before a config command (an
// editor's stale buffer), read by the gateway after the command's write,
// undoes the change: each command says so, NOT in force, exit 3, and a
// token issued is not shown (the file lost it). Each said its change was
// in force, exit 0, before (attack86 F1).
func TestAChangeALaterHandSaveUndidIsNotInForce(t *testing.T) {
	for _, args := range [][]string{
		{"device", "add", "desk-0002", "--read", "shared"},
		{"device", "set", "laptop-7f3a", "--kg", "read"},
		{"device", "remove", "laptop-7f3a"},
		{"token", "revoke", "laptop-7f3a"},
		{"token", "issue", "laptop-7f3a"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			cfg, _ := gatewayWithDevice(t, "--read", "shared", "--write", "shared")
			srv := openGateway(t, cfg)
			defer srv.Close()
			stale, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runAnsweredBy(t, cfg, func() {
				// Saved whole (a file written in place is empty for a
				// moment, and a command that reads it then cannot tell).
				if err := os.WriteFile(cfg+".swp", stale, 0o600); err != nil {
					t.Error(err)
				}
				if err := os.Rename(cfg+".swp", cfg); err != nil {
					t.Error(err)
				}
				if err := srv.Reload(); err != nil {
					t.Error(err)
				}
			}, args...)
			if code != exitNotInForce || out != "" || !strings.Contains(errOut, "a later edit of the file undid this change") || !strings.Contains(errOut, "NOT in force") {
				t.Errorf("undone by a hand save: exit %d, said %q %q", code, out, errOut)
			}
		})
	}
}

// runAnsweredBy runs the gateway command args on cfg and, once it has
// written the file, answer (the gateway's read). Its exit status, stdout
// and stderr.
func runAnsweredBy(t *testing.T, cfg string, answer func(), args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var out, errOut bytes.Buffer
		code := run(append([]string{"gateway", "--config", cfg}, args...), &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	for now, err := os.Stat(cfg); err == nil && now.ModTime().Equal(fi.ModTime()); now, err = os.Stat(cfg) {
		select {
		case r := <-done:
			t.Fatalf("%v answered before it wrote the file: exit %d, %q %q", args, r.code, r.out, r.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	answer()
	r := <-done
	return r.code, r.out, r.err
}
