package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token's hmac not as `token issue` writes it (64 lowercase hex digits:
// a hand edit garbled it, upper-cased it or cut digits off) can never
// match a token: the device would get a 401 blaming its token. It is
// refused at its line and column with the fix, at load and at a live
// reload, which keeps the previous config, and the device's token, in
// force (attack96 F2: taken silently, and `device list` said live).
func TestAGarbledTokenHMACIsRefusedAndTheOldConfigStays(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop := g.tokens["laptop-7f3a"]
	good, err := os.ReadFile(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	h := g.srv.cfg.Load().Devices[0].Tokens[0].HMAC
	reissue := "token issue laptop-7f3a"
	for _, c := range []struct{ name, bad, fix string }{{"garbled", "zz12", reissue}, {"upper-cased", strings.ToUpper(h), "write it in lower case"}, {"cut short", h[:62], reissue}} {
		name := c.name
		body := strings.Replace(string(good), `"`+h+`"`, `"`+c.bad+`"`, 1)
		if err := os.WriteFile(g.cfgFile, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(g.cfgFile)
		if err == nil || !strings.HasPrefix(err.Error(), g.cfgFile+":") || !strings.Contains(err.Error(), ": devices[0].tokens[0].hmac: ") ||
			!strings.Contains(err.Error(), "(fix: ") || !strings.Contains(err.Error(), c.fix) || strings.Contains(err.Error(), c.bad) {
			t.Errorf("%s: LoadConfig: %v\nwant FILE:LINE:COL: devices[0].tokens[0].hmac: ... (fix: %s..., not showing the hmac)", name, err, c.fix)
		}
		if err := g.srv.Reload(); err == nil {
			t.Errorf("%s: reloaded", name)
		}
		if _, rpc, code := g.call(laptop, "list_rooms", map[string]any{"wing": "shared"}); rpc != nil || code != 200 {
			t.Errorf("%s: the laptop's token stopped working after the refused reload: %d %v", name, code, rpc)
		}
	}
	// The fix sends to FILE.bak only when it holds the token (the file
	// before the last command: not when that command issued it).
	if _, err := LoadConfig(g.cfgFile); err == nil || strings.Contains(err.Error(), ".bak") {
		t.Errorf("with no FILE.bak: %v", err)
	}
	if err := os.WriteFile(g.cfgFile+".bak", good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(g.cfgFile); err == nil || !strings.Contains(err.Error(), "copy the token's lines back from "+g.cfgFile+".bak") {
		t.Errorf("with a FILE.bak that holds the token: %v", err)
	}
	// review30 F5: not when FILE.bak holds the token garbled the same way.
	garbled, err := os.ReadFile(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.cfgFile+".bak", garbled, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(g.cfgFile); err == nil || strings.Contains(err.Error(), ".bak") {
		t.Errorf("with a FILE.bak that holds the token garbled too: %v", err)
	}
	if err := os.WriteFile(g.cfgFile, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(g.cfgFile); err != nil {
		t.Errorf("the config as token issue wrote it: %v", err)
	}
}

// review30 F5: a revoked or expired token can never authenticate, so its
// garbled hmac does not stop the gateway from starting (nor every
// operator command, which validates the config).
func TestAGarbledHMACOfADeadTokenDoesNotStopStart(t *testing.T) {
	t.Parallel()
	const files = `"secret_file": "s", "audit_log": "a", `
	for _, end := range []string{`"revoked": true`, `"expires": "2020-01-01T00:00:00Z"`} {
		file := filepath.Join(t.TempDir(), "g.jsonc")
		os.WriteFile(file, []byte(`{`+files+`"devices": [{"id": "d", "tokens": [{"id": "t1", "hmac": "zz12", "created": "2019-01-01T00:00:00Z", `+end+`}]}]}`), 0o600)
		if _, err := LoadConfig(file); err != nil {
			t.Errorf("%s: %v", end, err)
		}
	}
}

// Every refusal of a device, its id, agents, grants and tokens, and of the
// config's required or malformed keys, says how to fix it (attack96 F3).
func TestIDRefusalsNameTheFix(t *testing.T) {
	t.Parallel()
	const hm = `"hmac": "0000000000000000000000000000000000000000000000000000000000000000", "created": "2026-01-0`
	tok := func(id, day string) string { return `{"id": "` + id + `", ` + hm + day + `T00:00:00Z"}` }
	const files = `"secret_file": "s", "audit_log": "a", `
	devs := func(d string) string { return files + `"devices": [` + d + `]` }
	for _, c := range []struct{ conf, want string }{
		{devs(`{"id": "d"}, {"id": "d"}`), `devices[1].id: "d" appears twice`},
		{devs(`{"id": "d", "tokens": [` + tok("t1", "1") + `]}, {"id": "e", "tokens": [` + tok("t1", "1") + `]}`), `devices[1].tokens[0].id: "t1" is used twice`},
		{devs(`{"id": "d", "tokens": [{"id": "t1"}]}`), `devices[0].tokens[0]: id and hmac are required`},
		{devs(`{"id": "d", "tokens": [{` + hm + `1T00:00:00Z"}]}`), `devices[0].tokens[0]: id and hmac are required`},
		{devs(`{"id": "z 9"}`), `(fix: write it as "z-9")`},
		{devs(`{"id": "_d"}, {"id": "d"}`), `(fix: write it as "d-2")`},
		{devs(`{"id": "` + "\u0430lice" + `"}`), `(fix: write it as "alice")`},    // a Cyrillic а reads as a: not "lice" (attack111 F9)
		{devs(`{"id": "` + "alic\u200be" + `"}`), `(fix: write it as "alice")`},   // an invisible character is dropped, not "alic-e"
		{devs(`{"id": "ＬＡＰ1"}`), `(fix: write it as "LAP1")`},                     // fullwidth letters are their ASCII, not "1" (attack113 F5)
		{devs(`{"id": "` + "desk\u0301-9" + `"}`), `(fix: write it as "desk-9")`}, // a combining mark is dropped, not "desk--9"
		{devs(`{"id": "` + "d\u0435sk-2" + `"}`), `(fix: write it as "desk-2")`},
		{devs(`{"id": "unknown"}`), `(fix: give the device another id, e.g. "unknown-device")`},
		{devs(`{"id": "d", "agents": ["open code/x@lap top"]}`), `(fix: write it as "open-code-x@lap-top", and have the agent send that as from_agent`},
		{devs(`{"id": "d", "agents": [""]}`), `(fix: remove it from the list)`},
		{devs(`{"id": "d", "tokens": [` + tok("t1", "1") + `, ` + tok("t2", "3") + `, ` + tok("t3", "2") + `]}`), `(fix: add "revoked": true to the older token(s), id "t1", so the two newest, "t2" and "t3", stay live)`},
		{devs(`{"id": "d", "bulk_delete": true}`), `(fix: give the device "admin": true too`},
		{`"audit_log": "a", "devices": []`, `secret_file: required (fix: add "secret_file": "gateway.secret"`},
		{`"secret_file": "s", "devices": []`, `audit_log: required (fix: add "audit_log": "audit/audit.jsonl"`},
		{files + `"instruction_wing": "wing_*", "devices": []`, `(fix: write one wing's name, as gateway init does, "instruction_wing": "wing_instructions"`},
		{files + `"instruction_wing": " wing_rules", "devices": []`, `(fix: write "wing_rules", without the spaces)`},
	} {
		file := filepath.Join(t.TempDir(), "g.jsonc")
		os.WriteFile(file, []byte("{\n  "+c.conf+",\n}\n"), 0o600)
		_, err := LoadConfig(file)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "(fix: ") {
			t.Errorf("%s: got %v, want %s ... (fix: ...)", c.conf, err, c.want)

		}
	}
}

// A required key a hand edit deleted is put back from FILE.bak, which the
// last gateway command left.
func TestRequiredKeyFixNamesTheBackup(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	os.WriteFile(file+".bak", []byte(`{"secret_file": "s", "audit_log": "old/audit.jsonl", "devices": []}`), 0o600)
	os.WriteFile(file, []byte(`{"secret_file": "s", "devices": []}`), 0o600)
	_, err := LoadConfig(file)
	if want := "(fix: copy its line back from " + file + ".bak"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %s", err, want)
	}
}
