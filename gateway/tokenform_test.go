package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every refusal of a device's or token's id, and of a token without id or
// hmac, says how to fix it (attack96 F3).
func TestIDRefusalsNameTheFix(t *testing.T) {
	t.Parallel()
	const hm = `"hmac": "0000000000000000000000000000000000000000000000000000000000000000", "created": "2026-01-01T00:00:00Z"`
	for _, c := range []struct{ devs, want string }{
		{`{"id": "d"}, {"id": "d"}`, `devices[1].id: "d" appears twice`},
		{`{"id": "d", "tokens": [{"id": "t1", ` + hm + `}]}, {"id": "e", "tokens": [{"id": "t1", ` + hm + `}]}`, `devices[1].tokens[0].id: "t1" is used twice`},
		{`{"id": "d", "tokens": [{"id": "t1"}]}`, `devices[0].tokens[0]: id and hmac are required`},
		{`{"id": "d", "tokens": [{` + hm + `}]}`, `devices[0].tokens[0]: id and hmac are required`},
	} {
		file := filepath.Join(t.TempDir(), "g.jsonc")
		os.WriteFile(file, []byte("{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": ["+c.devs+"],\n}\n"), 0o600)
		_, err := LoadConfig(file)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "(fix: ") {
			t.Errorf("%s: got %v, want %s ... (fix: ...)", c.devs, err, c.want)
		}
	}
}
