package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
)

// Each config command run again after the running gateway refused its
// change (a change the file holds already) says whether the change is in
// force, as the first run does: exit 3 while the gateway refuses the
// file, exit 0 once it takes it. `device remove` and `device add` run
// again said "device X was removed" or "device X exists", exit 1, while
// the removed device's token still worked (attack86 F2): a retry loop
// stopped there. A run again leaves FILE.bak as the file before the
// change.
func TestARerunAfterARefusalSaysWhetherTheChangeIsInForce(t *testing.T) {
	for _, c := range []struct {
		args       []string
		rerunTaken string // what the run again says once the gateway takes it
	}{
		{[]string{"device", "add", "desk-0002", "--read", "shared"}, "device desk-0002 is in the file already, as asked: read shared;"},
		{[]string{"device", "set", "laptop-7f3a", "--kg", "read"}, "device laptop-7f3a: read shared; write shared; kg read;"},
		{[]string{"device", "remove", "laptop-7f3a"}, "device laptop-7f3a is removed (already): its tokens do not work"},
		{[]string{"token", "revoke", "laptop-7f3a"}, "revoked 0 token(s)"},
	} {
		t.Run(strings.Join(c.args[:2], " "), func(t *testing.T) {
			cfg, _ := gatewayWithDevice(t, "--read", "shared", "--write", "shared")
			srv := openGateway(t, cfg)
			defer srv.Close()
			for i, refuse := range []bool{true, true, false} {
				code, out, errOut := runAnswered(t, cfg, srv, refuse, c.args...)
				switch {
				case refuse && (code != exitNotInForce || !strings.Contains(errOut, "NOT in force") || out != ""):
					t.Fatalf("run %d, refused: exit %d, said %q %q", i+1, code, out, errOut)
				case refuse && (i == 1) != strings.Contains(errOut, "holds this change already (nothing was written)"), refuse && (i == 0) != strings.Contains(errOut, "config is written"):
					t.Fatalf("run %d, refused: said %q, want the first that the config is written, the run again that the file holds the change already", i+1, errOut) // attack90 F4
				case !refuse && (code != 0 || !strings.HasPrefix(out, c.rerunTaken)):
					t.Fatalf("run %d, taken: exit %d, said %q %q", i+1, code, out, errOut)
				}
			}
			now, errNow := os.ReadFile(cfg)
			bak, errBak := os.ReadFile(cfg + ".bak")
			if errNow != nil || errBak != nil || bytes.Equal(now, bak) {
				t.Errorf("FILE.bak is not the file before the change: %v, %v", errNow, errBak)
			}
		})
	}
}

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

// runAnswered runs the gateway command args on cfg, and once it has
// written the file has srv read it: refused (its state file cannot be
// read in that moment) or taken. Its exit status, stdout and stderr.
func runAnswered(t *testing.T, cfg string, srv *gateway.Server, refuse bool, args ...string) (int, string, string) {
	t.Helper()
	return runAnsweredBy(t, cfg, func() {
		if !refuse {
			if err := srv.Reload(); err != nil {
				t.Error(err)
			}
			return
		}
		c, err := gateway.LoadConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		state := gateway.StateFile(cfg, c)
		kept, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
		if srv.Reload() == nil {
			t.Error("the gateway took a config whose state file it cannot read")
		}
		if err := os.WriteFile(state, kept, 0o600); err != nil {
			t.Fatal(err)
		}
	}, args...)
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
