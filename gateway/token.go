package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// TokenPrefix starts every device token: dbx_<token id>_<secret>_<checksum>.
const TokenPrefix = deviceinfo.TokenPrefix

// ErrBadToken is any credential that does not authenticate; the gateway
// never says which part was wrong.
var ErrBadToken = errors.New("invalid device token")

// LoadSecret reads c's server secret. A missing file is created (a random
// secret, 0600) only while c holds no live token: with tokens it cannot be
// a first use, and a new secret would make every issued token fail as
// "revoked, expired or mistyped", so the error names the file and the fix.
func LoadSecret(c *Config) ([]byte, error) {
	file := c.SecretFile
	b, err := os.ReadFile(file)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < 32 {
			return nil, fmt.Errorf("%s: the server secret is too short", file)
		}
		return []byte(s), nil
	}
	if !os.IsNotExist(err) {
		return nil, err
	}
	if n := c.liveTokens(time.Now()); n > 0 {
		return nil, fmt.Errorf("%s does not exist, and the config holds %d live token(s) it keys%s: a new secret would end every one: restore it from backup, or re-issue every device's token: 'devbox-config gateway token revoke DEVICE' for each device, then 'token issue DEVICE' (a new secret is made once no live token is left)", file, n, c.movedHint("secret_file", file))
	}
	s := randomHex(32)
	if err := os.WriteFile(file, []byte(s+"\n"), 0o600); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// secretCheckInput is what a secret's key check value is the HMAC of.
const secretCheckInput = "devbox-config gateway secret check v1"

// secretCheck is key's key check value: it tells one secret from another
// and says nothing of the secret.
func secretCheck(key []byte) string { return mac(key, secretCheckInput) }

// LoadCheckedSecret is LoadSecret, and the secret checked against the key
// check value the state file (stateFile) records: another gateway's
// secret or a wrong backup, well-formed but not the one c's live tokens
// were issued under, is refused, naming the file and the fix (before, it
// started and every token was refused, attack46 N8). The check value is
// recorded when there is none (a state from before it) and when c holds
// no live token (a new secret, or one to start over with).
func LoadCheckedSecret(c *Config, stateFile string) ([]byte, error) {
	key, err := LoadSecret(c)
	if err != nil {
		return nil, err
	}
	check := secretCheck(key)
	var wrong error
	err = withLock(stateFile, func(string) error {
		st, err := LoadState(stateFile)
		if err != nil {
			return fmt.Errorf("%s: %w", stateFile, err)
		}
		switch n := c.liveTokens(time.Now()); {
		case st.SecretCheck == check:
			return nil
		case st.SecretCheck != "" && n > 0:
			wrong = fmt.Errorf("%s is not the secret recorded for the config's %d live token(s) (it does not match secret_check in %s), so every device's token would be refused: put the right secret back in %s (from a backup of this gateway), or start over with this one: 'devbox-config gateway token revoke DEVICE' for each device, then 'token issue DEVICE' (the check is recorded again once no live token is left); but if the live tokens were issued under the secret in place (it was rotated with an older devbox-config's token commands, which leave the old check), delete secret_check from %s: it is recorded again at the next start", c.SecretFile, n, stateFile, c.SecretFile, stateFile)
			return nil
		}
		st.SecretCheck = check
		if err := writeState(stateFile, st); err != nil {
			return fmt.Errorf("recording the secret's check value in %s: %w", stateFile, err)
		}
		return nil
	})
	switch {
	case wrong != nil:
		return nil, wrong
	case err != nil:
		return key, fmt.Errorf("%w: %w", ErrCheckNotKept, err)
	}
	return key, nil
}

// ErrCheckNotKept says the secret is read but its check value could not
// be read or recorded beside the config (a read-only state path): the
// secret is used unchecked. The gateway starts and warns; a command that
// writes the state file fails there anyway.
var ErrCheckNotKept = errors.New("the server secret's check value could not be kept, so a wrong secret_file would not be told")

// liveTokens counts the tokens of c's devices that are neither revoked
// nor expired at now.
func (c *Config) liveTokens(now time.Time) int {
	n := 0
	for _, d := range c.Devices {
		for _, t := range d.Tokens {
			if t.Live(now) {
				n++
			}
		}
	}
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func checksum(id, secret string) string {
	sum := sha256.Sum256([]byte(TokenPrefix + "_" + id + "_" + secret))
	return hex.EncodeToString(sum[:])[:6]
}

func mac(key []byte, secret string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(secret)) // a hash never fails a write
	return hex.EncodeToString(m.Sum(nil))
}

// Issue makes a new token for device d: the returned string is shown once;
// only its HMAC is kept. A device holds at most two live tokens: issuing a
// third is refused (rotate instead).
func Issue(key []byte, d *Device, now time.Time) (string, error) {
	live := 0
	for _, t := range d.Tokens {
		if t.Live(now) {
			live++
		}
	}
	if live >= 2 {
		return "", fmt.Errorf("device %s already has two live tokens; revoke one first", d.ID)
	}
	id, secret := randomHex(6), randomHex(24)
	d.Tokens = append(d.Tokens, Token{ID: id, HMAC: mac(key, secret), Created: now.UTC()})
	return fmt.Sprintf("%s_%s_%s_%s", TokenPrefix, id, secret, checksum(id, secret)), nil
}

// Live reports whether t is taken at now: not revoked, not expired.
func (t Token) Live(now time.Time) bool {
	return !t.Revoked && (t.Expires == nil || t.Expires.After(now))
}

// AuthenticateWith finds the device a presented token belongs to. The
// token id selects the stored HMAC; the comparison is constant-time.
// firstUse gives a token's first use recorded outside the config (the
// gateway's state file; nil for none). A token stops at its expiry, or
// Grace after a newer token of its device was first used. It reports
// whether this is the token's first use (the caller records it); neither
// the config nor anything else is modified.
func AuthenticateWith(c *Config, firstUse func(id string) (time.Time, bool), key []byte, presented string, now time.Time) (*Device, *Token, bool, error) {
	parts := strings.Split(presented, "_")
	if len(parts) != 4 || parts[0] != TokenPrefix || checksum(parts[1], parts[2]) != parts[3] {
		return nil, nil, false, ErrBadToken
	}
	used := func(t *Token) (time.Time, bool) {
		if t.FirstUsed != nil {
			return *t.FirstUsed, true
		}
		if firstUse != nil {
			return firstUse(t.ID)
		}
		return time.Time{}, false
	}
	for i := range c.Devices {
		d := &c.Devices[i]
		for j := range d.Tokens {
			t := &d.Tokens[j]
			if t.ID != parts[1] {
				continue
			}
			if !hmac.Equal([]byte(t.HMAC), []byte(mac(key, parts[2]))) || !t.Live(now) {
				return nil, nil, false, ErrBadToken
			}
			// Rotated out: a newer token's first use starts the grace period.
			for k := range d.Tokens {
				o := &d.Tokens[k]
				if k == j || !o.Created.After(t.Created) || t.Expires != nil {
					continue
				}
				if at, ok := used(o); ok && !at.Add(c.Grace()).After(now) {
					return nil, nil, false, ErrBadToken
				}
			}
			_, seen := used(t)
			return d, t, !seen, nil
		}
	}
	return nil, nil, false, ErrBadToken
}

// Revoke makes one token (or, with id "", every token) of a device unusable.
func Revoke(d *Device, id string) int {
	n := 0
	for i := range d.Tokens {
		if (id == "" || d.Tokens[i].ID == id) && !d.Tokens[i].Revoked {
			d.Tokens[i].Revoked = true
			n++
		}
	}
	return n
}

// ReadSecretFile reads a secret (the upstream token) from a file that only
// its owner may read and that holds it alone, on one line: a group- or
// world-readable file, anything but a file, and a second line or a space
// inside are refused, never showing the secret. Blanks and empty lines
// around the token are not part of it (no token holds white space), as
// around MEMPALACE_UPSTREAM_TOKEN's value: a file written by echo or an
// editor ends in a newline, and a user expects that to be fine.
func ReadSecretFile(file string) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		what := "a special file"
		if fi.IsDir() {
			what = "a directory"
		}
		return "", fmt.Errorf("%s is %s, not a file: name the file that holds the token", file, what)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable by others (mode %o): chmod 600 %s", file, fi.Mode().Perm(), file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "", fmt.Errorf("%s holds more than a token (a second line, or white space inside it): write the token alone, on one line", file)
	}
	if name, ok := envName(s); ok {
		return "", fmt.Errorf("%s is in .env form (%s=...), and the whole line would be sent as the token: write the token alone, without %s= in front", file, name, name)
	}
	return s, nil
}

// envName is the NAME of a NAME=value line (NAME upper case: letters,
// digits, underscores, not a digit first; value neither empty nor
// starting with '='), which a token is not: a base64 token's '=' ends it
// ("QUJD=", "QUJDRA=="), and a name in lower or mixed case is a token's.
func envName(s string) (string, bool) {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" || value == "" || value[0] == '=' || name[0] >= '0' && name[0] <= '9' {
		return "", false
	}
	for _, r := range name {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return "", false
		}
	}
	return name, true
}
