package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A state file that does not parse names its line and column and the fix,
// and is left as it was.
func TestStateErrorNamesLineColumnAndFix(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "gateway.jsonc.state.json")
	body := "{\n  \"first_used\": {\"t1\": \"2026-01-01T00:00:00Z\",}\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := LoadState(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":2:46: ") || !strings.Contains(err.Error(), "(fix: remove the comma") {
		t.Errorf("got %v, want %s:2:46: ... (fix: remove the comma...", err, file)
	}
	if b, _ := os.ReadFile(file); string(b) != body {
		t.Error("the state file changed")
	}
}

// A config value that parses but is refused names its line and column too.
func TestConfigValidationNamesLineColumn(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": [\n    {\"id\": \"d\"},\n    {\"id\": \"e\", \"kg\": \"all\"},\n  ],\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := LoadConfig(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":6:23: devices[1].kg: \"all\" must be none, read or write") {
		t.Errorf("got %v, want %s:6:23: devices[1].kg: ...", err, file)
	}
}

// A wing glob with whitespace MemPalace never leaves in a wing name (at
// its start or end, or a tab or control character anywhere: a hand-edited
// " wing_alice") can never match: the device would silently lose the
// wing. It is refused like the empty glob, at its line and column, with
// the glob to write instead. A space inside a glob stays: wing names may
// hold one.
func TestConfigRefusesWhitespaceInGlobs(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	for _, c := range []struct{ glob, want string }{
		{` wing_alice`, `5:36: devices[0].read[1]: device d: " wing_alice" has whitespace at its start or end, which no wing name has, so it can never match a wing; write "wing_alice"`},
		{`wing_alice\t`, `5:36: devices[0].read[1]: device d: "wing_alice\t" has whitespace at its start or end, which no wing name has, so it can never match a wing; write "wing_alice"`},
		{`wing\nalice`, `5:36: devices[0].read[1]: device d: "wing\nalice" holds a control character or whitespace other than a space, which no wing name has, so it can never match a wing`},
		{`wing one`, ``},
	} {
		body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": [\n    {\"id\": \"d\", \"read\": [\"shared\", \"" + c.glob + "\"]},\n  ],\n}\n"
		os.WriteFile(file, []byte(body), 0o600)
		_, err := LoadConfig(file)
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.glob, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), file+":"+c.want) {
			t.Errorf("%q: got %v, want %s:%s", c.glob, err, file, c.want)
		}
	}
}

// Every number of the config refused for being negative is named alone,
// at its own line and column, with the fix (attack13 09: delete_cap=-5
// was "trash_retention_days, delete_cap: must not be negative", with no
// place and naming a key the file did not have; a negative
// ledger_retention_days was taken).
func TestConfigNegativeNumbersNamedAtTheirPlace(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	for _, c := range []struct{ top, dev, want string }{
		{top: `"grace_days": -1`, want: `3:17: grace_days: -1 must not be negative (fix: `},
		{top: `"ledger_retention_days": -3`, want: `3:28: ledger_retention_days: -3 must not be negative (fix: `},
		{top: `"trash_retention_days": -2`, want: `3:27: trash_retention_days: -2 must not be negative (fix: `},
		{top: `"delete_cap": -5`, want: `3:17: delete_cap: -5 must not be negative (fix: `},
		{top: `"audit_checkpoint_lines": -1`, want: `3:29: audit_checkpoint_lines: -1 must not be negative (fix: `},
		{top: `"audit_checkpoint_seconds": -1`, want: `3:31: audit_checkpoint_seconds: -1 must not be negative (fix: `},
		{dev: `, "read_rate": -1`, want: `5:45: devices[0].read_rate: -1 must not be negative (fix: `},
		{dev: `, "write_rate": -0.5`, want: `5:46: devices[0].write_rate: -0.5 must not be negative (fix: `},
	} {
		body := "{\n  \"secret_file\": \"s\", \"audit_log\": \"a\",\n  " + c.top
		if c.top != "" {
			body += ","
		}
		body += "\n  \"devices\": [\n    {\"id\": \"d\", \"read\": [\"x\"]" + c.dev + "},\n  ],\n}\n"
		os.WriteFile(file, []byte(body), 0o600)
		_, err := LoadConfig(file)
		if err == nil || !strings.HasPrefix(err.Error(), file+":"+c.want) {
			t.Errorf("%s%s: got %v, want %s:%s...", c.top, c.dev, err, file, c.want)
		}
	}
}

// An emptied config says so, and what to do: the version before the last
// operator command is in FILE.bak, and init refuses to overwrite the file
// (attack13 09: "close every {, [ ...", then init refused, no backup).
func TestEmptyConfigSaysHowToRestore(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	os.WriteFile(file, []byte("{\"secret_file\": \"s\", \"audit_log\": \"a\", \"devices\": []}\n"), 0o600)
	if _, err := UpdateConfig(file, func(c *Config) error {
		c.Devices = append(c.Devices, Device{ID: "alice", Read: []string{"x"}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadConfig(file + ".bak"); err != nil || len(c.Devices) != 0 {
		t.Errorf("FILE.bak after an operator change: %v, %+v (want the version before it)", err, c)
	}
	for _, body := range []string{"", "\n  \n", "// all gone\n"} {
		os.WriteFile(file, []byte(body), 0o600)
		_, err := LoadConfig(file)
		if err == nil || !strings.HasPrefix(err.Error(), file+": the file is empty") || !strings.Contains(err.Error(), file+".bak") || !strings.Contains(err.Error(), "gateway init") {
			t.Errorf("%q: got %v, want %s: the file is empty ... %s.bak ... gateway init", body, err, file, file)
		}
	}
}

// An emptied config that no gateway command ever rewrote has no FILE.bak:
// the fix does not send the operator to it (attack14 06), it says there
// is none.
func TestEmptyConfigWithoutBakDoesNotNameIt(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	os.WriteFile(file, nil, 0o600)
	_, err := LoadConfig(file)
	if err == nil || strings.Contains(err.Error(), "cp "+file+".bak") || !strings.Contains(err.Error(), "no "+file+".bak") || !strings.Contains(err.Error(), "your own backup") {
		t.Errorf("got %v, want no cp of a %s.bak that does not exist: say there is none, and to restore your own backup", err, file)
	}
}

// A value the config refuses after it parses says where and how to fix
// it, like every config error (attack27 g1, g7): a token's created time
// that is no time (was Go's raw `parsing time "yesterday" as
// "2006-01-02T15:04:05Z07:00"`, no place), a null device (was
// `devices[0].id: ""`, no place), a number out of range or not whole (was
// "is a number (1e400) (fix: make it a number...)").
func TestConfigValueMistakesPlacedWithFix(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	for _, c := range []struct{ top, dev, want, fix string }{
		{dev: `, "tokens": [{"id": "t1", "hmac": "zz", "created": "yesterday"}]`, want: `6:81: devices[0].tokens[0].created is a string ("yesterday"), not a time`, fix: `"2006-01-02T15:04:05Z"`},
		{dev: `, "tokens": [{"id": "t1", "hmac": "zz", "created": 5}]`, want: `6:81: devices[0].tokens[0].created is a number (5), not a time`, fix: `RFC 3339`},
		{top: `"devices": [null]`, want: `4:15: devices[0].id: missing`, fix: `remove`},
		{dev: `, "read_rate": 1e400`, want: `6:45: devices[0].read_rate: 1e400 is out of range`, fix: `a smaller number`},
		{top: `"delete_cap": 1e3,`, want: `4:17: delete_cap: 1e3 is not written as a whole number`, fix: `write it as 1000`},
		{top: `"delete_cap": 2.5,`, want: `4:17: delete_cap: 2.5 is not a whole number`, fix: `make it a whole number`},
		{top: `"delete_cap": 99999999999999999999,`, want: `4:17: delete_cap: 99999999999999999999 is out of range`, fix: `at most 9223372036854775807`},
	} {
		body := "{\n  \"secret_file\": \"s\", \"audit_log\": \"a\",\n  \n  " + c.top
		if !strings.HasPrefix(c.top, `"devices"`) {
			body += "\n  \"devices\": [\n    {\"id\": \"d\", \"read\": [\"x\"]" + c.dev + "},\n  ]"
		}
		body += "\n}\n"
		os.WriteFile(file, []byte(body), 0o600)
		_, err := LoadConfig(file)
		if err == nil || !strings.HasPrefix(err.Error(), file+":"+c.want) || !strings.Contains(err.Error(), "(fix: ") || !strings.Contains(err.Error(), c.fix) {
			t.Errorf("%s%s: got %v, want %s:%s ... (fix: ...%s", c.top, c.dev, err, file, c.want, c.fix)
		}
	}
}

// A config saved with a UTF-8 byte order mark (Notepad) is read: the
// gateway's commands rewrite it without one (attack27 g7: refused with
// "invalid character '\ufeff'" and the fix for a missing comma).
func TestConfigWithBOMIsRead(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	os.WriteFile(file, []byte("\xef\xbb\xbf{\"secret_file\": \"s\", \"audit_log\": \"a\", \"devices\": [{\"id\": \"d\", \"kg\": \"rw\"}]}\n"), 0o600)
	if _, err := LoadConfig(file); err == nil || !strings.HasPrefix(err.Error(), file+":1:73: devices[0].kg") {
		t.Errorf("got %v, want the kg refused at %s:1:73 (columns count bytes, the mark three)", err, file)
	}
	os.WriteFile(file, []byte("\xef\xbb\xbf{\"secret_file\": \"s\", \"audit_log\": \"a\", \"devices\": [{\"id\": \"d\"}]}\n"), 0o600)
	if c, err := LoadConfig(file); err != nil || c.Device("d") == nil {
		t.Errorf("got %v, want the config read", err)
	}
}

// A kg or untrusted value the config refuses carries its fix, like every
// other config error: the value it is likely a typo of, and the values
// there are.
func TestConfigEnumErrorsNameTheFix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for body, want := range map[string]string{
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","kg":"wrte"}]}`:                       `devices[0].kg: "wrte" must be none, read or write (fix: did you mean "write"? write one of none, read, write)`,
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","kg":"all"}]}`:                        `(fix: write one of none, read, write)`,
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","trusts":["d"],"untrusted":"hide"}]}`: `devices[0].untrusted: "hide" must be mark or withhold (fix: write one of mark, withhold)`,
	} {
		f := filepath.Join(dir, "g.jsonc")
		os.WriteFile(f, []byte(body), 0o600)
		if _, err := LoadConfig(f); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one holding %s", body, err, want)
		}
	}
}
