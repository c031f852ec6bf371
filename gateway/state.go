package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// State is what the running gateway learns and must keep: a token's first
// use (which makes it current and starts its predecessor's grace period).
// It lives in its own file, written only by the gateway; the config is
// written only by operator commands. Neither ever rewrites the other's
// file, so an operator's `device remove` or `token revoke` can never be
// undone by a request.
type State struct {
	// FirstUsed is each token's first use, by token id.
	FirstUsed map[string]time.Time `json:"first_used"`
	// SecretCheck is the server secret's key check value (secretCheck),
	// recorded when the secret is made or first read: a secret_file that
	// does not match it is refused (LoadCheckedSecret).
	SecretCheck string `json:"secret_check,omitempty"`
}

// StateFile is where a config's runtime state lives: the config's
// state_file, else <config file>.state.json beside the real file when the
// config is reached through a symlink (so both names find one state).
func StateFile(configFile string, c *Config) string {
	switch {
	case c != nil && c.StateFile != "":
		return c.StateFile
	case c != nil && c.file != "":
		return c.file + ".state.json"
	}
	return configFile + ".state.json"
}

// LoadState reads a state file; a missing file is an empty state.
func LoadState(file string) (*State, error) {
	st := &State{FirstUsed: map[string]time.Time{}}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := (confpos.JSON{}).DecodeJSON(file, b, st); err != nil {
		return nil, err
	}
	if st.FirstUsed == nil {
		st.FirstUsed = map[string]time.Time{}
	}
	return st, nil
}

// RecordFirstUse adds first uses to the state file under its lock: the
// file is re-read and merged (an earlier record of a token wins), so two
// writers never drop each other's records.
func RecordFirstUse(file string, uses map[string]time.Time) error {
	return withLock(file, func(string) error {
		st, err := LoadState(file)
		if err != nil {
			return err
		}
		changed := false
		for id, t := range uses {
			if old, ok := st.FirstUsed[id]; !ok || t.Before(old) {
				st.FirstUsed[id] = t.UTC()
				changed = true
			}
		}
		if !changed {
			return nil
		}
		return writeState(file, st)
	})
}

// writeState writes st to file (0600), under its lock (withLock).
func writeState(file string, st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	_, err = filewrite.Write(file, append(b, '\n'), 0o600)
	return err
}

// UpdateConfig is an operator's change to the config: under the config's
// lock the file is re-read, change applied to what is on disk now, the
// result validated and written atomically. Two operator commands never
// lose each other's change; the gateway never writes the config at all.
// written is false when the file held the change already (a re-run).
func UpdateConfig(file string, change func(*Config) error) (written bool, err error) {
	// No lock file beside a config that is not there (a mistyped --config
	// left an empty <file>.lock behind).
	if _, err := os.Stat(file); err != nil {
		return false, err
	}
	err = withLock(file, func(real string) error {
		c, err := LoadConfig(file)
		if err != nil {
			return err
		}
		st, err := LoadState(StateFile(file, c))
		if err != nil {
			return err
		}
		c.FoldState(st)
		settled := c.nameKeys()
		if err := change(c); err != nil {
			return err
		}
		if err := c.validate(settled); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		written, err = c.saveKeeping(real)
		return err
	})
	return written, err
}

// saveKeeping saves c over file, keeping the version it replaces in
// FILE.bak (0600: it holds token HMACs too): a hand edit that empties or
// breaks the file can be undone to the last command's state. written is
// false when file held c already.
func (c *Config) saveKeeping(file string) (written bool, err error) {
	prev, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	b, err := c.encoded()
	if err != nil {
		return false, err
	}
	// A change made already (a command run again) leaves FILE.bak as the
	// version before it; the new mtime still has the running gateway
	// read the file and record what it did with it, for the command to
	// confirm. Not allowed to set it (not the file's owner): written.
	if now := time.Now(); bytes.Equal(prev, b) && os.Chtimes(file, now, now) == nil {
		return false, nil
	}
	if _, err := filewrite.Write(file+".bak", prev, 0o600); err != nil {
		return false, fmt.Errorf("keeping the config's previous version: %w", err)
	}
	_, err = filewrite.Write(file, b, 0o600)
	return err == nil, err
}

// FoldState writes what the state records into the config's tokens: each
// token's first use, and the expiry (Grace after a newer token's first
// use) of a token rotated out. The gateway computes the same from the two
// files; an operator command folds them so that what it saves, and what
// `device list` and the two-live-tokens rule see, is current.
func (c *Config) FoldState(st *State) {
	for i := range c.Devices {
		d := &c.Devices[i]
		for j := range d.Tokens {
			if t := &d.Tokens[j]; t.FirstUsed == nil {
				if at, ok := st.FirstUsed[t.ID]; ok {
					at := at.UTC()
					t.FirstUsed = &at
				}
			}
		}
		for j := range d.Tokens {
			t := &d.Tokens[j]
			if t.Expires != nil || t.Revoked {
				continue
			}
			for k := range d.Tokens {
				o := &d.Tokens[k]
				if k == j || !o.Created.After(t.Created) || o.FirstUsed == nil {
					continue
				}
				if e := o.FirstUsed.Add(c.Grace()).UTC(); t.Expires == nil || e.Before(*t.Expires) {
					t.Expires = &e
				}
			}
		}
	}
}

// withLock runs fn holding an exclusive flock on <real>.lock, real being
// file with symlinks followed (fn gets it): a file reached by two names
// (a symlink and its target) has one lock, beside the real file.
func withLock(file string, fn func(real string) error) error {
	real, err := filewrite.Resolve(file)
	if err != nil {
		return err
	}
	f, err := openLock(real)
	if err != nil {
		return err
	}
	defer f.Close() // a lock file: nothing written to it
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("%s.lock: %w", real, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // closing the file releases it anyway
	return fn(real)
}

// openLock opens (creating it) real's lock file. Root gives it to real's
// owner (its directory's while real is not there), as filewrite does the
// files it writes: a lock root made and kept would shut the gateway's own
// user out of every command (attack90 F1).
func openLock(real string) (*os.File, error) {
	lock := real + ".lock"
	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrPermission) {
		if abs, aerr := filepath.Abs(real); aerr == nil { // else named as given
			real, lock = abs, abs+".lock"
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named below, in full
		}
		return nil, fmt.Errorf("cannot open the lock file %s: %w: it (or its directory) is another user's, one root made with an older devbox-config?; run this as the owner of %s or as root, or give the lock to that owner: sudo chown --reference=%s %s", lock, err, real, real, lock)
	}
	if err != nil || os.Getuid() != 0 {
		return f, err
	}
	fi, serr := os.Stat(real)
	if serr != nil {
		fi, serr = os.Stat(filepath.Dir(real))
	}
	if serr == nil { // else the lock stays as made: not worth failing the command
		st := fi.Sys().(*syscall.Stat_t)
		if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil {
			f.Close()
			return nil, fmt.Errorf("giving %s to the owner of %s: %w", lock, real, err)
		}
	}
	return f, nil
}

// tokenState is the gateway's in-memory view of the state file.
type tokenState struct {
	mu    sync.Mutex
	file  string
	first map[string]time.Time
}

func (ts *tokenState) firstUse(id string) (time.Time, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.first[id]
	return t, ok
}

// load replaces the view with the file's content.
func (ts *tokenState) load(file string) error {
	st, err := LoadState(file)
	if err != nil {
		return err
	}
	ts.mu.Lock()
	ts.file, ts.first = file, st.FirstUsed
	ts.mu.Unlock()
	return nil
}

// record notes a first use in memory at once and in the state file.
func (ts *tokenState) record(id string, at time.Time) error {
	ts.mu.Lock()
	if _, ok := ts.first[id]; ok {
		ts.mu.Unlock()
		return nil
	}
	ts.first[id] = at.UTC()
	file := ts.file
	ts.mu.Unlock()
	return RecordFirstUse(file, map[string]time.Time{id: at})
}

// keptFile is a file a gateway that has served keeps across starts: its
// config key ("" when it is the default, beside the audit log), its name
// and what it holds; db: a SQLite store, never empty once opened (its
// header and tables are written when it is made), so one emptied
// (Emptied) is a loss as a missing file is.
type keptFile struct {
	key, name, path, holds string
	db                     bool
}

// kept are c's files a gateway that has served keeps across starts (its
// state in stateFile).
func (c *Config) kept(stateFile string) []keptFile {
	set := func(key, v string) string {
		if v == "" {
			return ""
		}
		return key
	}
	k := []keptFile{
		{"secret_file", "the server secret", c.SecretFile, "every device's token is keyed with it", false},
		{"audit_log", "the audit log", c.AuditLog, "the hash-chained record of every request", false},
		{set("ledger_file", c.LedgerFile), "the op-id ledger", c.LedgerPath(), "a resent write is answered from it, not applied again", true},
		{set("trash_file", c.TrashFile), "the trash", c.TrashPath(), "the deletes 'gateway trash restore' brings back", true},
		{set("provenance_file", c.ProvenanceFile), "the provenance index", c.ProvenancePath(), "who wrote each record: trust and knowledge-graph ownership", true},
		{set("state_file", c.StateFile), "the state file", stateFile, "the tokens' first uses and the secret's check", false},
	}
	if c.SigningKeyFile != "" {
		k = append(k, keptFile{"signing_key_file", "the audit signing key", c.SigningKeyFile, "the audit log's checkpoints are signed with it", false})
	}
	return k
}

// served says why the gateway of c (its state st) has served before: its
// audit log is there, or a token's first use is recorded; "" when neither.
func (c *Config) served(st *State) string {
	if fi, err := os.Stat(c.AuditLog); err == nil && fi.Size() > 0 {
		return "its audit log " + c.AuditLog + " is there"
	}
	if r := Rotated(c.AuditLog); r != "" {
		return "its rotated audit log " + r + " is there"
	}
	used := len(st.FirstUsed) > 0
	for _, d := range c.Devices {
		for _, t := range d.Tokens {
			used = used || t.FirstUsed != nil
		}
	}
	if used {
		return "a token's first use is recorded"
	}
	return ""
}

// CheckKept refuses a gateway that has served (served) whose kept files
// are missing, or emptied stores (Emptied), naming each, what it
// holds and the fix: started, it would make each anew, empty, and say
// nothing (the deletes the trash kept, the op ids resends are answered
// from, who wrote what, a new signing key). A gateway that never served
// makes them on its first start.
func (c *Config) CheckKept(configFile string) error {
	why, lost, err := c.LostKept(configFile)
	if err != nil || len(lost) == 0 {
		return err
	}
	return fmt.Errorf("this gateway has served (%s), but %s. Starting would make each anew and empty: put each back from a backup of this gateway's directory, or point the config at where it is now; to start without it, losing what it held, add --new-state", why, strings.Join(lost, "; "))
}

// LostKept says why the gateway of c has served ("" when it has not,
// and then nothing is lost) and, if it has, each kept file that is
// missing or empty: its name, path, what it held and, for a moved
// directory, where it may be.
func (c *Config) LostKept(configFile string) (why string, lost []string, err error) {
	stateFile := StateFile(configFile, c)
	st, err := LoadState(stateFile)
	if err != nil {
		return "", nil, fmt.Errorf("state_file: %w", err)
	}
	if why = c.served(st); why == "" {
		return "", nil, nil
	}
	for _, k := range c.kept(stateFile) {
		fi, err := os.Stat(k.path)
		rotated := k.path == c.AuditLog && Rotated(k.path) != "" // OpenAudit chains on from it
		switch {
		case rotated:
		case errors.Is(err, os.ErrNotExist):
			lost = append(lost, fmt.Sprintf("%s %s (%s) does not exist%s%s%s", k.name, k.path, k.holds, c.movedHint(k.key, k.path), c.linkedState(configFile, k.path), c.rotatedHint(k.path)))
		case err == nil && k.path == c.AuditLog && fi.Size() == 0:
			lost = append(lost, fmt.Sprintf("%s %s (%s) is empty, 0 bytes: a new chain would start there, which no anchor vouches for%s", k.name, k.path, k.holds, c.rotatedHint(k.path)))
		case err == nil && k.db:
			if why := Emptied(k.path, fi); why != "" {
				lost = append(lost, fmt.Sprintf("%s %s (%s) %s", k.name, k.path, k.holds, why))
			}
		}
	}
	return why, lost, nil
}

// rotatedHint is the fix for an audit log (path) with no line and no
// rotated file holding an audit line beside it (Rotated): one moved away while the gateway was
// stopped is chained on from once it is back; "" for another kept file.
func (c *Config) rotatedHint(path string) string {
	if path != c.AuditLog {
		return ""
	}
	b := filepath.Base(path)
	return fmt.Sprintf(" (rotated away while the gateway was stopped? no %s.1 or %s.1.gz holding an audit line is beside it: move the newest rotated file back there under that name, and the gateway chains on from it)", b, b)
}

// Emptied says how the store at path (fi: its file) holds nothing, ""
// when it is not so: 0 bytes, or a database with no tables. A store of a
// gateway that has served so is lost, not empty (a truncated copy, a
// failed restore, a new file put in its place); one that does not open is
// the store's own to refuse, saying why.
func Emptied(path string, fi os.FileInfo) string {
	if fi.Size() == 0 {
		return "is empty, 0 bytes (a truncated copy or a failed restore?)"
	}
	if n, err := sqlitewal.Tables(path); err == nil && n == 0 {
		return "is an empty database, with no tables (a new file put in its place?)"
	}
	return ""
}

// linkedState says where the default state file (path) of a config
// given through a link (configFile) is when an
// earlier build kept it beside the link, not the config's real file;
// "" when it is not there.
func (c *Config) linkedState(configFile, path string) string {
	beside := configFile + ".state.json"
	if c.StateFile != "" || path != StateFile(configFile, c) || beside == path {
		return ""
	}
	if _, err := os.Stat(beside); err != nil {
		return ""
	}
	return fmt.Sprintf(" (%s, beside the link the config was given by, is where earlier builds kept it: move it to %s)", beside, path)
}

// movedHint says where path's file (the config's key, "" for a default
// path) is if the gateway's directory was moved: the config's directory
// holds a file of its name (its last one to three path elements), naming
// it and the fix; "" when none.
func (c *Config) movedHint(key, path string) string {
	if c.dir == "" || key == "" {
		return ""
	}
	parts := strings.Split(filepath.Clean(path), string(filepath.Separator))
	for n := 1; n <= 3 && n < len(parts); n++ {
		rel := filepath.Join(parts[len(parts)-n:]...)
		at := filepath.Join(c.dir, rel)
		if _, err := os.Stat(at); at != path && err == nil {
			return fmt.Sprintf(" (%s is beside the config, so the gateway's directory may have moved: set %s to %q in the config, a path relative to its directory)", at, key, rel)
		}
	}
	return ""
}
