package gateway

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// instanceLock is the running gateway's hold on its audit log: an
// exclusive flock on <audit_log>.lock, with the holder's pid and its
// store schema versions in the file (holder).
// The audit log has one writer (two would break its hash chain for
// good), so a second gateway on the same log is refused at start. The
// kernel drops the lock when the process ends, however it ends: there is
// no stale lock to clean up. Readers (audit verify) and the operator's
// config changes (their own <config>.lock) do not take it.
type instanceLock struct {
	f       *os.File
	applied string // the record of the config in force beside it (applied.go)
}

// lockInstance takes the lock for auditLog, or says who holds it. The
// lock is beside the real file (symlinks followed): a log reached through
// a link is the same log, with the same lock.
func lockInstance(auditLog string) (*instanceLock, error) {
	real, err := filewrite.Resolve(auditLog)
	if err != nil {
		return nil, fmt.Errorf("audit_log: %w", err)
	}
	file := real + ".lock"
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit_log lock: %w", err)
	}
	if err := flockSoon(f); err != nil {
		b, _ := os.ReadFile(file)
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("audit_log lock %s: %w", file, err)
		}
		return nil, fmt.Errorf("another gateway (%s) runs on the audit log %s: it holds %s, and two gateways appending to one log break its hash chain for good. Stop that gateway first (a restart: stop, then start), or give this one a config with its own audit_log", parseHolder(b).pid, auditLog, file)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+schemas()+"\n"), 0) // only a hint for the refusals (parseHolder)
	}
	return &instanceLock{f: f, applied: real + appliedSuffix}, nil
}

// flockSoon takes f's lock, waiting up to lockWait while another holds
// it: a lock this process just released can still be held for a moment
// by a child being forked (the descriptor is shared until its exec
// closes it), so a restart in one process (a test's, a reload's) met
// "another gateway runs on the audit log" now and then (CI 97). A
// gateway that runs still holds it after the wait.
func flockSoon(f *os.File) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockWait bounds flockSoon's wait.
const lockWait = 500 * time.Millisecond

// release lets another gateway start on the log (nil, or released: nothing).
func (l *instanceLock) release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0) // no pid left behind for the next holder's refusals
	l.f.Close()     // closing it releases the flock
	l.f = nil
}

// holder is what the lock file says of the gateway that holds it: its
// pid ("pid N", or "pid unknown") and the schema version it brings each
// store to at its start (none named: a release from before it said).
type holder struct {
	pid     string
	schemas map[string]int
}

// schemas is the lock file's second line: this release's store schema
// versions, which its gateway brings its stores to when it starts.
func schemas() string {
	return fmt.Sprintf("ledger=%d trash=%d provenance=%d", ledger.SchemaVersion, trash.SchemaVersion, provenance.SchemaVersion)
}

// parseHolder reads a lock file's content (only a hint: a pid, then
// schemas).
func parseHolder(b []byte) holder {
	h := holder{pid: "pid unknown", schemas: map[string]int{}}
	first, rest, _ := strings.Cut(string(b), "\n")
	if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil {
		h.pid = "pid " + strconv.Itoa(pid)
	}
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		if n, err := strconv.Atoi(v); err == nil {
			h.schemas[k] = n
		}
	}
	return h
}

// migrates reports a holder whose start brings each store named in need
// to its version or beyond: a gateway of this release (or a newer one)
// that is migrating them now or has failed to, not an older one whose
// stores would be migrated under it (attack85 F4: a gateway starting
// holds the lock a moment before its stores are migrated). This
// command's own open waits for a migration under way (sqlitewal.Versioned).
func (h *holder) migrates(need map[string]int) bool {
	for k, v := range need {
		if h.schemas[k] < v {
			return false
		}
	}
	return true
}

// serving says which gateway holds auditLog's lock now (nil when none
// does): holderAt of the log, symlinks followed.
func serving(auditLog string) (*holder, error) {
	real, err := filewrite.Resolve(auditLog)
	if err != nil {
		return nil, fmt.Errorf("audit_log: %w", err)
	}
	return holderAt(real)
}

// holderAt says which gateway holds the lock of the audit log at real
// (nil when none does). It tries the lock, shared, without waiting and
// lets it go at once: only a gateway's exclusive lock refuses it, not
// another command's probe at the same moment (review27 D5). A log with no
// lock file has had no gateway of a release that takes it; a lock that
// exists but cannot be opened is an error (fs.ErrPermission: whether a
// gateway runs is not known to this user).
func holderAt(real string) (*holder, error) {
	f, err := os.Open(real + ".lock")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit_log lock: %w", err)
	}
	defer f.Close() // read only; closing it releases a lock it took
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		b, _ := os.ReadFile(real + ".lock") // only a hint: unreadable, it names no pid
		h := parseHolder(b)
		return &h, nil
	case err != nil:
		return nil, fmt.Errorf("audit_log lock %s: %w", real+".lock", err)
	}
	return nil, nil
}

// CheckNoOlderGateway refuses a command other than the gateway itself
// (the trash commands) when opening c's stores would migrate one in place
// under a running gateway: one holds the audit log's lock and a store is
// of an older schema, which this release's gateway migrates at its start,
// so the one that runs is an older release's, unless its lock file says
// it brings them to this release's versions (a gateway of this release
// starting, holder.migrates). Migrated under an older one, the store is
// one it can no longer start on, and the backup an operator takes once it
// is stopped already holds it (attack83 F9).
func (c *Config) CheckNoOlderGateway() error {
	var behind []string
	need := map[string]int{} // the version each store behind is brought to
	for _, s := range []struct {
		key, name, path string
		version         int
	}{
		{"ledger", "the op-id ledger", c.LedgerPath(), ledger.SchemaVersion},
		{"trash", "the trash", c.TrashPath(), trash.SchemaVersion},
		{"provenance", "the provenance index", c.ProvenancePath(), provenance.SchemaVersion},
	} {
		if _, err := os.Stat(s.path); err != nil {
			continue // none to migrate; its own open says what else is wrong
		}
		tables, v, err := sqlitewal.Schema(s.path)
		if err == nil && tables > 0 && v < s.version { // an unreadable one: its own open says so
			behind = append(behind, fmt.Sprintf("%s %s (schema version %d; this release's is %d)", s.name, s.path, v, s.version))
			need[s.key] = s.version
		}
	}
	if len(behind) == 0 {
		return nil
	}
	h, err := serving(c.AuditLog)
	if err != nil || h == nil || h.migrates(need) {
		return err
	}
	return fmt.Errorf("a gateway of an older release (%s) runs on these files, of its schema: %s. This release migrates a store in place when it opens it; migrated under that gateway, it could not start on them again, nor from a backup taken after it stops. Stop that gateway first (Upgrading, step 2: %s; step 3 backs them up while it is stopped), then run this again or start this release's gateway, either of which migrates them", h.pid, strings.Join(behind, ", "), sqlitewal.UpgradeDoc)
}
