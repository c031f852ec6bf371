package doctor

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// authLog is a primary that answers /healthz and logs every Authorization
// header it is sent.
func authLog(t *testing.T) (url string, sent func() []string) {
	t.Helper()
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			auths = append(auths, a)
		}
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/healthz") {
			w.Write([]byte("ok"))
			return
		}
		http.Error(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"unauthorized"}}`, http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), auths...) }
}

// attack88 F2: doctor called a plain-http non-loopback URL an error, the
// token crossing the network in clear text, then sent the token over it.
// It never sends the token there now, and says it did not; the finding is
// a warning, as render's (which keeps the rung: a docker0 address is sound).
func TestDoctorNeverSendsTheTokenInClearText(t *testing.T) {
	u, sent := authLog(t)
	b := newBox(t)
	// 0.0.0.0 reaches this host's listener, yet is neither https nor loopback
	b.env["MEMPALACE_REMOTE_URL"] = strings.Replace(u, "127.0.0.1", "0.0.0.0", 1) + "/mcp"
	b.env["MEMPALACE_REMOTE_TOKEN"] = "primary-secret-0123456789"
	fs := b.run()
	if s := sent(); len(s) > 0 {
		t.Fatalf("doctor sent the token over plain http to a non-loopback host: %q", s)
	}
	only(t, fs, "warn:"+IDTokenCleartext)
	if !strings.Contains(fs[0].Message, "clear text") || !strings.Contains(fs[0].Message, "doctor did not send it") {
		t.Fatalf("the finding does not say doctor kept the token back: %s", fs[0].Message)
	}
}

// attack88 F6: a token no header can carry got a second error,
// primary-unreachable, sending the user to a primary that is up.
func TestATokenNoHeaderCarriesIsNotCalledAnUnreachablePrimary(t *testing.T) {
	u, sent := authLog(t)
	b := newBox(t)
	b.env["MEMPALACE_REMOTE_URL"] = u + "/mcp"
	b.env["MEMPALACE_REMOTE_TOKEN"] = "primary-secret\n0123456789"
	fs := b.run()
	only(t, fs, "error:"+IDEnvFallback)
	if s := sent(); len(s) > 0 {
		t.Fatalf("sent: %q", s)
	}
}

// attack88 F3: a name assigned twice in .env was taken silently (the last
// wins), and env-fallback then said to set what line 1 already set. doctor
// names the name and both lines, never the values.
func TestDoctorNamesAVariableAssignedTwice(t *testing.T) {
	b := newBox(t)
	env := filepath.Join(b.home, "dup.env")
	write(t, env, "MEMPALACE_REMOTE_URL=http://127.0.0.1:1/mcp\nMEMPALACE_REMOTE_TOKEN=primary-secret-0123456789\nMEMPALACE_EDGE=1\nMEMPALACE_REMOTE_URL=\n", 0o600)
	b.opts.EnvFiles = []string{env}
	b.env["MEMPALACE_EDGE"] = "1"
	b.env["MEMPALACE_REMOTE_TOKEN"] = "primary-secret-0123456789"
	var dup []Finding
	for _, f := range b.run() {
		if f.ID == IDEnvDuplicate {
			dup = append(dup, f)
		}
	}
	if len(dup) != 1 || dup[0].Severity != Warn || !strings.Contains(dup[0].Message, "MEMPALACE_REMOTE_URL") || !strings.Contains(dup[0].Message, env+":1") || !strings.Contains(dup[0].Message, env+":4") || strings.Contains(dup[0].Message, "127.0.0.1") {
		t.Fatalf("%+v", dup)
	}
}
