package gateway

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/invisible"
	"github.com/joakimp/devbox-config/lookalike"
	"github.com/tailscale/hujson"
	"golang.org/x/text/unicode/norm"
)

// Config is the gateway's JSONC configuration file.
type Config struct {
	// SecretFile holds the server secret that keys token HMACs (0600).
	SecretFile string `json:"secret_file"`
	// UpstreamTokenFile holds the upstream's shared token (0600); the
	// environment's MEMPALACE_UPSTREAM_TOKEN wins.
	UpstreamTokenFile string `json:"upstream_token_file,omitempty"`
	// AuditLog is the append-only JSONL audit file.
	AuditLog string `json:"audit_log"`
	// SigningKeyFile holds the Ed25519 key that signs checkpoints of the
	// audit chain (created if missing; the public half is <file>.pub).
	// Optional; keep it out of the log's directory: whoever can rewrite the
	// log and read the key can sign a rewritten log.
	SigningKeyFile string `json:"signing_key_file,omitempty"`
	// A signed checkpoint follows every AuditCheckpointLines lines
	// (default 100) and comes AuditCheckpointSeconds (default 60) after a
	// line none covers yet; each is also written to AuditAnchor: "stderr"
	// (the service manager's journal) or a file outside the log's
	// directory, which `audit verify --anchor` checks the log against.
	AuditCheckpointLines   int    `json:"audit_checkpoint_lines,omitempty"`
	AuditCheckpointSeconds int    `json:"audit_checkpoint_seconds,omitempty"`
	AuditAnchor            string `json:"audit_anchor,omitempty"`
	// StateFile is where the running gateway records what it learns
	// (a token's first use); default <config file>.state.json. The gateway
	// never writes the config itself.
	StateFile string `json:"state_file,omitempty"`
	// LedgerFile is the op-id ledger (default: op-ledger.sqlite beside the
	// audit log); LedgerRetentionDays how long an op id is remembered
	// (default 7).
	LedgerFile          string `json:"ledger_file,omitempty"`
	LedgerRetentionDays int    `json:"ledger_retention_days,omitempty"`
	// GraceDays is how long a rotated-out token stays valid after the new
	// one is first used (default 7).
	GraceDays int `json:"grace_days,omitempty"`
	// TrashFile keeps the drawers a delete through the gateway removed
	// (default: trash.sqlite beside the audit log); TrashRetentionDays how
	// long (default 30). DeleteCap is the most drawers one delete may
	// remove from a device without the bulk_delete grant (default 10).
	TrashFile          string `json:"trash_file,omitempty"`
	TrashRetentionDays int    `json:"trash_retention_days,omitempty"`
	DeleteCap          int    `json:"delete_cap,omitempty"`
	// ProvenanceFile is the provenance index (default: provenance.sqlite
	// beside the audit log): who wrote each record, for the origin every
	// answer's records carry.
	ProvenanceFile string `json:"provenance_file,omitempty"`
	// InstructionWing is the wing for instructions every agent may act on
	// (RFC 001 §6.1): every device may read it, only admin devices whose
	// write globs match it write it. "" (absent): none.
	InstructionWing string `json:"instruction_wing,omitempty"`
	// RemovedDevices are the ids of removed devices (`device remove`
	// adds them): the provenance index and other devices' trust still
	// name them, so a new device under one would inherit the old one's
	// records and trust; `device add --reuse-removed-id` takes one back.
	// No device trusts what they wrote (origin's "removed").
	RemovedDevices []string `json:"removed_devices,omitempty"`
	// RemovedAgents maps each agent name a device no longer has to its
	// id (`device remove` adds a removed device's, `device set` those it
	// drops; a config from before has none): another device given one
	// (or a look-alike) reads every ask addressed to it, old ones
	// included, so only `device add|set --take-removed-agents` gives it.
	RemovedAgents map[string]string `json:"removed_agents,omitempty"`
	Devices       []Device          `json:"devices"`

	// file is the config file with symlinks followed and dir its
	// directory, which a relative path in it is relative to (LoadConfig
	// resolves them): a config reached through a symlinked file finds the
	// same files by both names. written is those paths as the file has
	// them, which Save writes back.
	file, dir string
	written   [nPaths]string
	// sum is the SHA-256 (hex) of the file's bytes LoadConfig read: the
	// running gateway records it (Applied).
	sum string
}

// nPaths is how many file paths a config has (paths).
const nPaths = 9

// paths points at the config's file paths.
func (c *Config) paths() [nPaths]*string {
	return [...]*string{&c.SecretFile, &c.UpstreamTokenFile, &c.AuditLog, &c.SigningKeyFile, &c.AuditAnchor, &c.StateFile, &c.LedgerFile, &c.TrashFile, &c.ProvenanceFile}
}

// resolve makes each relative path absolute, relative to dir (the config
// file's directory, so the gateway's directory can be moved whole), and
// keeps each as written for Save.
func (c *Config) resolve(dir string) {
	c.dir = dir
	for i, p := range c.paths() {
		c.written[i] = *p
		if *p != "" && *p != AnchorStderr && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// asWritten is c with each path it resolved as the file had it.
func (c *Config) asWritten() *Config {
	out := *c
	for i, p := range out.paths() {
		if w := c.written[i]; w != "" && !filepath.IsAbs(w) && *p == filepath.Join(c.dir, w) {
			*p = w
		}
	}
	return &out
}

// Device is one machine's identity and what it may do.
type Device struct {
	ID    string `json:"id"`    // opaque (a uuid), compared, never parsed
	Label string `json:"label"` // human only
	// Read and Write are wing globs (path.Match).
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
	// KG is the knowledge-graph grant ("" is KGNone).
	KG KGGrant `json:"kg,omitempty"`
	// Agents are the from_agent names the device may use
	// ("<harness>@<label>", RFC 003 §3.2).
	Agents      []string `json:"agents,omitempty"`
	Admin       bool     `json:"admin,omitempty"`       // deletes in its write globs (kept in the trash); with read and write "*" delete_by_source, hook_settings, reconnect, mesh_peers (never sync or mine, never an unknown tool)
	Coordinator bool     `json:"coordinator,omitempty"` // sees every event, not only its agents'
	// BulkDelete lets an admin device make one delete of more drawers than
	// the config's delete_cap (they still go to the trash).
	BulkDelete bool    `json:"bulk_delete,omitempty"`
	Tokens     []Token `json:"tokens,omitempty"`
	// Rate limits (requests per second; 0 = the defaults).
	ReadRate  float64 `json:"read_rate,omitempty"`
	WriteRate float64 `json:"write_rate,omitempty"`
	// MaxStreams is how many /logstream/stream it may hold open at once
	// (0: one per agent, at least DefaultStreamShare; streamShare).
	MaxStreams int `json:"max_streams,omitempty"`
	// Trusts names the devices whose records this device trusts (and
	// itself); absent: every device's, and records of unknown origin.
	Trusts []string `json:"trusts,omitempty"`
	// Untrusted is what its answers do with a record from outside Trusts.
	Untrusted Untrusted `json:"untrusted,omitempty"`

	// instructions is the config's instruction wing, and header what the
	// gateway tells the device about itself on every /mcp answer
	// (deviceinfo): both set when the config is loaded.
	instructions, header string
	// removed is the config's removed devices and live its devices' ids:
	// the device trusts no record of a device outside live (set when the
	// config is loaded).
	removed []string
	live    map[string]bool
}

// Untrusted is what a device's answers do with a record written by a
// device it does not trust.
type Untrusted string

const (
	// UntrustedMark (the default): the record's origin says
	// "trusted": false.
	UntrustedMark Untrusted = "mark"
	// UntrustedWithhold: the record is left out of the answer.
	UntrustedWithhold Untrusted = "withhold"
)

func (u Untrusted) String() string { return string(u) }

// KGGrant is a device's knowledge-graph grant.
type KGGrant string

const (
	KGNone  KGGrant = "none"
	KGRead  KGGrant = "read"  // kg_query, kg_timeline, kg_stats
	KGWrite KGGrant = "write" // and kg_add, kg_invalidate, kg_supersede
)

func (g KGGrant) String() string { return string(cmp.Or(g, KGNone)) }

// Token is a stored credential: never the secret, only its HMAC.
type Token struct {
	ID        string     `json:"id"`
	HMAC      string     `json:"hmac"`
	Created   time.Time  `json:"created"`
	FirstUsed *time.Time `json:"first_used,omitempty"`
	// Expires, when set, ends the token (an operator's choice); a token
	// rotated out also ends Grace after its successor's first use.
	Expires *time.Time `json:"expires,omitempty"`
	Revoked bool       `json:"revoked,omitempty"`
}

// Compiled on first use, not at init: the same binary runs render at every
// container start, which must not pay for the gateway's patterns.
var (
	deviceIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })
	agentRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[^\s/]{1,128}$`) })
)

// restoreFix is an emptied config's fix: its FILE.bak where one exists
// (a gateway command wrote it), else the operator's own backup.
func restoreFix(file string) string {
	restore := fmt.Sprintf("restore your own backup (there is no %s.bak: a gateway command that changes the file writes one)", file)
	if _, err := os.Stat(file + ".bak"); err == nil {
		restore = fmt.Sprintf("restore it: %[1]s.bak holds it as it was before the last gateway command changed it (cp %[1]s.bak %[1]s, then redo that command, a revoke or remove included; hand edits made since are not in it), else restore your own backup", file)
	}
	return restore + ". `gateway init` refuses to overwrite the file: to start over, remove it, run init, then add every device and issue each a new token"
}

// LoadConfig reads and validates a config file (JSONC). Errors name the
// file, the line and column (a *confpos.Error) and the field.
func LoadConfig(file string) (*Config, error) {
	c, _, err := loadConfig(file)
	return c, err
}

// loadConfig is LoadConfig, with the SHA-256 (hex) of the bytes it read
// ("" if it read none), which a refused config has too (Applied).
func loadConfig(file string) (*Config, string, error) {
	b, err := os.ReadFile(file)
	if fi, serr := os.Stat(file); err != nil && serr == nil && fi.IsDir() {
		in := filepath.Join(file, DefaultConfigFile)
		return nil, "", fmt.Errorf("%s is a directory, not a gateway config: give the file, --config %s ('%s' writes one there)", file, in, Hint(in, "init"))
	}
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	c, err := parseConfig(file, b)
	if err != nil {
		return nil, hex.EncodeToString(sum[:]), err
	}
	c.sum = hex.EncodeToString(sum[:])
	return c, c.sum, nil
}

// parseConfig parses and validates file's bytes b.
func parseConfig(file string, b []byte) (*Config, error) {
	if bytes.HasPrefix(b, []byte(bom)) { // Notepad's; the next save drops it
		b = append([]byte("   "), b[len(bom):]...) // columns stay the file's
	}
	if blank(b) {
		real, _ := filewrite.Resolve(file) // it was just read: it resolves
		return nil, &confpos.Error{File: file, What: "the file is empty (no config: no device, no token)", Fix: restoreFix(real)}
	}
	var c Config
	if err := (confpos.JSON{JSONC: true, Strict: true}).DecodeJSON(file, b, &c); err != nil {
		return nil, err
	}
	real, err := filewrite.Resolve(file)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: its directory, which the config's relative paths are relative to: %w", file, err)
	}
	c.file = real
	c.resolve(filepath.Dir(real)) // before Validate: its path checks see the paths used
	if err := c.Validate(); err != nil {
		return nil, confpos.Placed(file, b, err, "") // each says what it must be
	}
	c.bind()
	return &c, nil
}

// bom is a UTF-8 byte order mark.
const bom = "\xef\xbb\xbf"

// blank reports a file of white space and comments alone: with a value
// after them, it parses as that value.
func blank(b []byte) bool {
	v, err := hujson.Parse(append(bytes.Clone(b), "\n0"...))
	lit, ok := v.Value.(hujson.Literal)
	return err == nil && ok && string(lit) == "0"
}

// bind gives each device what it needs of the whole config.
func (c *Config) bind() {
	live := make(map[string]bool, len(c.Devices))
	for _, d := range c.Devices {
		live[d.ID] = true
	}
	for i := range c.Devices {
		c.Devices[i].live = live
		c.Devices[i].instructions = c.InstructionWing
		c.Devices[i].removed = c.RemovedDevices
		c.Devices[i].header = c.deviceInfo(&c.Devices[i]).HeaderValue()
	}
}

// Validate checks every field. A rule that can never match is an error,
// not a silent deny-all.
func (c *Config) Validate() error { return c.validate(nil) }

// validate is Validate, the names of the devices in settled (nameKeys)
// taken as given: a look-alike names the other device (checkNames).
func (c *Config) validate(settled map[string]bool) error {
	if err := c.checkRequired(); err != nil {
		return err
	}
	if err := c.checkNumbers(); err != nil {
		return err
	}
	if c.AuditAnchor != "" && c.SigningKeyFile == "" {
		return errors.New("audit_anchor: anchors are written with signed checkpoints, and there are none without signing_key_file: set it too")
	}
	if err := checkAnchorPlace(c.AuditAnchor, c.AuditLog); err != nil {
		return err
	}
	if w := c.InstructionWing; w != "" && (strings.TrimSpace(w) != w || strings.ContainsAny(w, `*?[\/`)) {
		fix := `write one wing's name, as gateway init does, "instruction_wing": "wing_instructions"; or remove the line to have no instruction wing`
		if t := strings.TrimSpace(w); !strings.ContainsAny(t, `*?[\/`) && t != "" {
			fix = fmt.Sprintf("write %q, without the spaces", t)
		}
		return fmt.Errorf("instruction_wing: %q must be one wing's name (no glob characters, '/' or surrounding spaces) (fix: %s)", w, fix)
	}
	seen := map[string]bool{}
	for _, d := range c.Devices {
		seen[d.ID] = false
	}
	tokens := map[string]bool{}
	for i, d := range c.Devices {
		at := fmt.Sprintf("devices[%d]", i)
		if err := checkDeviceID(at, d.ID, seen); err != nil {
			return err
		}
		if err := checkGrants(at, d); err != nil {
			return err
		}
		if err := checkTokens(at, c.file, d, tokens); err != nil {
			return err
		}
		if d.BulkDelete && !d.Admin {
			return fmt.Errorf(`%s.bulk_delete: only an admin device may delete, so the grant can never apply (fix: give the device "admin": true too (with a command, --admin), or remove "bulk_delete")`, at)
		}
		if err := cmp.Or(nonNegative(at+".read_rate", d.ReadRate, "50 a second"), nonNegative(at+".write_rate", d.WriteRate, "10 a second"), nonNegative(at+".max_streams", d.MaxStreams, fmt.Sprintf("one stream per agent, at least %d", DefaultStreamShare))); err != nil {
			return err
		}
		if err := checkTrust(at, d, seen); err != nil {
			return err
		}
	}
	for i, id := range c.RemovedDevices {
		if _, ok := seen[id]; ok {
			return fmt.Errorf("removed_devices[%d]: %q was removed, and a device under its id would inherit the old device's records and the trust that named it (fix: give the device a new id, or, if it is the same machine, drop the id from removed_devices)", i, id)
		}
	}
	if err := c.checkRemovedAgents(); err != nil {
		return err
	}
	return c.checkNames(settled)
}

// checkRequired refuses a config without secret_file or audit_log: the
// fix is its line from FILE.bak where that holds one, else what gateway
// init writes.
func (c *Config) checkRequired() error {
	for _, r := range []struct{ key, val, sample, made string }{
		{"secret_file", c.SecretFile, "gateway.secret", "beside this file, made on first use while no token is live); with tokens issued, name the file that holds the secret they were issued under, or every token is refused"},
		{"audit_log", c.AuditLog, "audit/audit.jsonl", "below this file's directory, made on first use); for a gateway that ran before, name the log it wrote"},
	} {
		if r.val != "" {
			continue
		}
		fix := fmt.Sprintf(`add "%s": %q (as gateway init writes: %s`, r.key, r.sample, r.made)
		if bakHolds(c.file, `"`+r.key+`"`) {
			fix = fmt.Sprintf("copy its line back from %s.bak (the file before the last gateway command changed it); else %s", c.file, fix)
		}
		return fmt.Errorf("%s: required (fix: %s)", r.key, fix)
	}
	return nil
}

// bakHolds reports whether file's FILE.bak, the file before the last
// gateway command changed it, holds s.
func bakHolds(file, s string) bool {
	if file == "" {
		return false // a config built in memory: no .bak to name
	}
	b, err := os.ReadFile(file + ".bak")
	return err == nil && bytes.Contains(b, []byte(s))
}

// checkRemovedAgents refuses a device's agent that is, or looks like, one
// removed_agents gives another device (removed, or live and dropped it):
// it would read every ask addressed to that one, or pass for it on the
// coordination log.
func (c *Config) checkRemovedAgents() error {
	for i, d := range c.Devices {
		for j, a := range d.Agents {
			name, was := c.RemovedAgent(a)
			if was != "" && was != d.ID && (name != a || c.Device(was) != nil) {
				return c.heldAgent(i, j, a, name, was)
			}
			if was != "" && was != d.ID {
				return fmt.Errorf("devices[%d].agents[%d]: %q was an agent of removed device %s (removed_agents): this device would read every ask ever addressed to it, old ones included, and could answer them as it (fix: another agent, <harness>@<this device's label>; or, for a machine that replaces %s, take it over on purpose with --take-removed-agents, or by deleting %q from removed_agents in the config)", i, j, a, was, was, a)
			}
		}
	}
	return nil
}

// checkDeviceID refuses a device's id (at: its place) that is empty, not
// an id, the unknown origin's name, or one seen before; it marks the id
// seen.
func checkDeviceID(at, id string, seen map[string]bool) error {
	if id == "" {
		return fmt.Errorf("%s.id: missing or empty (fix: give the device an id of 1-64 letters, digits, . _ - (an opaque id such as a uuid); a null or {} in devices is no device: remove it)", at)
	}
	if !deviceIDRE().MatchString(id) {
		return fmt.Errorf("%s.id: %q must be 1-64 of letters, digits, . _ -, the first a letter or digit (an opaque id such as a uuid) (fix: write it as %q)", at, id, idLike(id, seen))
	}
	if id == origin.Unknown {
		return fmt.Errorf("%s.id: %q is what answers call a record of unknown origin (fix: give the device another id, e.g. %q)", at, id, idLike(id+"-device", seen))
	}
	if seen[id] {
		return fmt.Errorf("%s.id: %q appears twice (fix: give each device its own id, or remove one of the two)", at, id)
	}
	seen[id] = true
	return nil
}

// idLike is an id for a device whose id is not one: read in its
// compatibility form (fullwidth ＬＡＰ1 is LAP1) with combining marks
// dropped (ḱ is k), an invisible character dropped, a look-alike written
// as the ASCII it reads as (Cyrillic а is a: "аlice" is "alice", not
// "lice"), each other character an id cannot hold a '-', the first a
// letter or digit, at most 64, none of the ids in seen; "device-N" where
// nothing of it is left.
func idLike(id string, seen map[string]bool) string {
	var b strings.Builder
	for _, r := range norm.NFKD.String(id) {
		a, looks := lookalike.ReadsAs(r)
		switch {
		case r < 0x80 && (r == '.' || r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		case invisible.Is(r) || unicode.Is(unicode.Mn, r):
		case looks && r >= 0x80:
			b.WriteString(a)
		default:
			b.WriteByte('-')
		}
	}
	s := b.String()
	s = strings.TrimLeft(s, "._-")
	s = s[:min(len(s), 60)] // ASCII: room for a "-N"
	if s == "" {
		s = "device"
	}
	try := s
	for n := 2; ; n++ {
		if _, taken := seen[try]; !taken && try != origin.Unknown {
			return try
		}
		try = fmt.Sprintf("%s-%d", s, n)
	}
}

// checkGrants refuses a device's read or write glob, kg grant or agent
// name that can never match.
func checkGrants(at string, d Device) error {
	for field, globs := range map[string][]string{"read": d.Read, "write": d.Write} {
		for j, g := range globs {
			if err := checkGlob(g); err != nil {
				return fmt.Errorf("%s.%s[%d]: device %s: %w", at, field, j, d.ID, err)
			}
		}
	}
	switch d.KG {
	case "", KGNone, KGRead, KGWrite:
	default:
		return fmt.Errorf("%s.kg: %q must be none, read or write (fix: %s)", at, d.KG, oneOf(string(d.KG), KGNone, KGRead, KGWrite))
	}
	for j, a := range d.Agents {
		if !agentRE().MatchString(a) {
			return fmt.Errorf("%s.agents[%d]: %q can never match a from_agent (no spaces or '/', 1-128 characters) (fix: %s)", at, j, a, agentFix(a))
		}
	}
	return nil
}

// agentFix is the fix for agent name a that can never match: the name
// with each space and '/' a '-', cut to 128 characters; an empty one
// removed.
func agentFix(a string) string {
	s := []rune(strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '/' {
			return '-'
		}
		return r
	}, strings.TrimSpace(a)))
	if len(s) == 0 {
		return "remove it from the list"
	}
	return fmt.Sprintf("write it as %q, and have the agent send that as from_agent (<harness>@<this device's label>); or remove it from the list", string(s[:min(len(s), 128)]))
}

// oneOf is the fix for v, not one of the valid values: the one it is
// likely a typo of, else the list.
func oneOf[T ~string](v string, valid ...T) string {
	names := make([]string, len(valid))
	for i, n := range valid {
		names[i] = string(n)
	}
	if s := confpos.Nearest(v, names); s != "" {
		return fmt.Sprintf("did you mean %q? write one of %s", s, strings.Join(names, ", "))
	}
	return "write one of " + strings.Join(names, ", ")
}

// checkTokens refuses a token of device d (at: its place in file) without
// an id or hmac, a live one with an hmac token issue never writes (no
// token could match it: the device would be refused as if its token were
// wrong; a revoked or expired one never authenticates, so its hmac stops
// nothing), an id used before (tokens: every device's so far; it marks
// these), and more than two live tokens.
func checkTokens(at, file string, d Device, tokens map[string]bool) error {
	var live []Token
	now := time.Now()
	for j, t := range d.Tokens {
		if t.ID == "" || t.HMAC == "" {
			return fmt.Errorf("%s.tokens[%d]: id and hmac are required (fix: %s)", at, j, reissueFix(file, d.ID, t.ID))
		}
		if what := checkHMAC(t.HMAC); what != "" && t.Live(now) {
			fix := reissueFix(file, d.ID, t.ID)
			if strings.ToLower(t.HMAC) != t.HMAC && checkHMAC(strings.ToLower(t.HMAC)) == "" {
				fix = "write it in lower case: token issue wrote it so"
			}
			return fmt.Errorf("%s.tokens[%d].hmac: %s, so no token can match it: the device's calls with its token would be refused as if the token were wrong (fix: %s)", at, j, what, fix)
		}
		if tokens[t.ID] {
			return fmt.Errorf("%s.tokens[%d].id: %q is used twice (fix: remove the copy: token issue gives each token its own id; to give this device a token of its own, '%s')", at, j, t.ID, Hint(file, "token issue "+d.ID))
		}
		tokens[t.ID] = true
		if t.Live(now) {
			live = append(live, t)
		}
	}
	if len(live) > 2 {
		return fmt.Errorf("%s.tokens: %d live tokens; at most two (current and the one being rotated out) (fix: %s)", at, len(live), revokeFix(live))
	}
	return nil
}

// revokeFix is the fix for more live tokens than two: revoke all but the
// two newest.
func revokeFix(live []Token) string {
	slices.SortStableFunc(live, func(a, b Token) int { return b.Created.Compare(a.Created) })
	ids := make([]string, 0, len(live)-2)
	for _, t := range live[2:] {
		ids = append(ids, strconv.Quote(t.ID))
	}
	return fmt.Sprintf(`add "revoked": true to the older token(s), id %s, so the two newest, %q and %q, stay live`, strings.Join(ids, ", "), live[0].ID, live[1].ID)
}

// checkHMAC says how h is not what Issue writes, 64 lowercase hex digits
// (an HMAC-SHA256), without showing it; "" if it is.
func checkHMAC(h string) string {
	const want = 2 * sha256.Size
	n := 0
	for _, r := range h {
		if n++; !strings.ContainsRune("0123456789abcdef", r) {
			return fmt.Sprintf("character %d is %q, and token issue writes %d lowercase hex digits", n, string(r), want)
		}
	}
	if n != want {
		return fmt.Sprintf("%d hex digits, and token issue writes %d", n, want)
	}
	return ""
}

// reissueFix is the fix for a token (id tok) of device dev that file
// holds garbled: its lines from FILE.bak where that holds them with an
// hmac as token issue writes it (it is the file before the last gateway
// command: not if that command issued it, nor if the token was garbled
// before it), else from a backup, else a new token.
func reissueFix(file, dev, tok string) string {
	from := "your own backup"
	if tok != "" && bakHasToken(file, tok) {
		from = file + ".bak (the file before the last gateway command changed it) or " + from
	}
	return fmt.Sprintf("copy the token's lines back from %s; else remove this token from the list and issue the device a new one, '%s', and put it in its .env as MEMPALACE_REMOTE_TOKEN", from, Hint(file, "token issue "+dev))
}

// bakHasToken reports whether file's FILE.bak holds token tok with a
// well-formed hmac.
func bakHasToken(file, tok string) bool {
	if !bakHolds(file, `"`+tok+`"`) {
		return false
	}
	var bak struct {
		Devices []struct {
			Tokens []Token `json:"tokens"`
		} `json:"devices"`
	}
	b, err := os.ReadFile(file + ".bak")
	if err != nil || (confpos.JSON{JSONC: true}).DecodeJSON(file+".bak", b, &bak) != nil {
		return false // gone since, or it does not parse: no fix
	}
	for _, d := range bak.Devices {
		for _, t := range d.Tokens {
			if t.ID == tok && checkHMAC(t.HMAC) == "" {
				return true
			}
		}
	}
	return false
}

// checkNumbers refuses a negative number, each by its own key.
func (c *Config) checkNumbers() error {
	return cmp.Or(
		nonNegative("grace_days", c.GraceDays, "7 days"),
		nonNegative("ledger_retention_days", c.LedgerRetentionDays, "7 days"),
		nonNegative("trash_retention_days", c.TrashRetentionDays, "30 days"),
		nonNegative("delete_cap", c.DeleteCap, fmt.Sprint(DefaultDeleteCap, " drawers")),
		nonNegative("audit_checkpoint_lines", c.AuditCheckpointLines, fmt.Sprint(CheckpointEvery, " lines")),
		nonNegative("audit_checkpoint_seconds", c.AuditCheckpointSeconds, fmt.Sprint(CheckpointAfter.Seconds(), " seconds")),
	)
}

// nonNegative refuses a negative n at key (its default def).
func nonNegative[N int | float64](key string, n N, def string) error {
	if n >= 0 {
		return nil
	}
	return fmt.Errorf("%s: %v must not be negative (fix: set it to 0 or more; 0, or no %s at all, is the default, %s)", key, n, key[strings.LastIndexByte(key, '.')+1:], def)
}

// checkGlob refuses a wing glob that can never match a wing. MemPalace's
// sanitize_name strips a wing name's surrounding whitespace and allows no
// whitespace inside it but a space, and no control character.
func checkGlob(g string) error {
	if strings.TrimFunc(g, catalogue.PythonSpace) == "" {
		return errors.New("an empty glob can never match a wing; remove it from the list (on the command line, a doubled, leading or trailing comma in --read or --write makes one: write 'a,b', not 'a,,b')")
	}
	if catalogue.SanitizedName(g) != g {
		return fmt.Errorf("%q has whitespace at its start or end, which no wing name has, so it can never match a wing; write %q", g, catalogue.SanitizedName(g))
	}
	if strings.ContainsFunc(g, func(r rune) bool { return unicode.IsControl(r) || (r != ' ' && catalogue.PythonSpace(r)) }) {
		return fmt.Errorf("%q holds a control character or whitespace other than a space, which no wing name has, so it can never match a wing; remove it", g)
	}
	if _, err := path.Match(g, "x"); err != nil {
		return fmt.Errorf("%q is not a valid glob: %w; close each [ with ], and write a literal *, ?, [ or \\ as \\*, \\?, \\[ or \\\\", g, err)
	}
	return nil
}

// NearestID is the one of ids that id, no id of them, was likely meant
// as: one it looks like (lookalike.Skeleton: a fullwidth or Cyrillic
// letter, an accent), else one a typo away (confpos.Nearest); "" if none.
func NearestID(id string, ids []string) string {
	for _, c := range ids {
		if lookalike.Skeleton(c) == lookalike.Skeleton(id) {
			return c
		}
	}
	return confpos.Nearest(id, ids)
}

// checkTrust checks a device's trusted set against the devices there are
// (known holds every device id of the config).
func checkTrust(at string, d Device, known map[string]bool) error {
	if d.Trusts != nil && len(d.Trusts) == 0 {
		return fmt.Errorf("%s.trusts: an empty list; name the devices it trusts (its own id alone to trust only itself), or leave trusts out to trust every device", at)
	}
	for j, id := range d.Trusts {
		if _, ok := known[id]; ok {
			continue
		}
		if near := NearestID(id, slices.Sorted(maps.Keys(known))); near != "" {
			return fmt.Errorf("%s.trusts[%d]: %q is no device of this config: did you mean %q? (fix: write %q)", at, j, id, near, near)
		}
		return fmt.Errorf("%s.trusts[%d]: %q is no device of this config (records of unknown origin are never trusted by a device that names a set)", at, j, id)
	}
	switch d.Untrusted {
	case "", UntrustedMark, UntrustedWithhold:
	default:
		return fmt.Errorf("%s.untrusted: %q must be mark or withhold (fix: %s)", at, d.Untrusted, oneOf(string(d.Untrusted), UntrustedMark, UntrustedWithhold))
	}
	if d.Untrusted != "" && d.Trusts == nil {
		return fmt.Errorf("%s.untrusted: without trusts the device trusts every device, so no record is untrusted; name its trusted devices too, or drop untrusted", at)
	}
	return nil
}

// Grace is how long an old token lives after its successor's first use.
func (c *Config) Grace() time.Duration { return days(c.GraceDays, 7*24*time.Hour) }

// Device returns the device with id.
func (c *Config) Device(id string) *Device {
	for i := range c.Devices {
		if c.Devices[i].ID == id {
			return &c.Devices[i]
		}
	}
	return nil
}

// Save writes the config atomically (fsynced, mode 0600: it holds token
// HMACs). Operator commands go through UpdateConfig, which locks and
// re-reads first.
func (c *Config) Save(file string) error {
	b, err := c.encoded()
	if err != nil {
		return err
	}
	_, err = filewrite.Write(file, b, 0o600)
	return err
}

// encoded is the file's bytes for c.
func (c *Config) encoded() ([]byte, error) {
	b, err := json.MarshalIndent(c.asWritten(), "", "  ")
	return append(b, '\n'), err
}

// LedgerPath is the op-id ledger's file.
func (c *Config) LedgerPath() string { return cmp.Or(c.LedgerFile, ledger.Beside(c.AuditLog)) }

// LedgerRetention is how long the ledger remembers an op id.
func (c *Config) LedgerRetention() time.Duration { return days(c.LedgerRetentionDays, 7*24*time.Hour) }

// ProvenancePath is the provenance index's file.
func (c *Config) ProvenancePath() string {
	return cmp.Or(c.ProvenanceFile, provenance.Beside(c.AuditLog))
}

// TrashPath is the trash's file.
func (c *Config) TrashPath() string { return cmp.Or(c.TrashFile, trash.Beside(c.AuditLog)) }

// TrashRetention is how long the trash keeps a delete.
func (c *Config) TrashRetention() time.Duration {
	return days(c.TrashRetentionDays, trash.DefaultRetention)
}

// days is a setting in days, or def when it is not set.
func days(n int, def time.Duration) time.Duration {
	if n > 0 {
		return time.Duration(n) * 24 * time.Hour
	}
	return def
}

// DefaultDeleteCap is delete_cap's default.
const DefaultDeleteCap = 10

// DeleteCapOrDefault is the most drawers one delete may remove from a
// device without the bulk_delete grant.
func (c *Config) DeleteCapOrDefault() int { return cmp.Or(c.DeleteCap, DefaultDeleteCap) }

// Cadence is how often the audit log is signed.
func (c *Config) Cadence() Cadence {
	return Cadence{Lines: c.AuditCheckpointLines, Interval: time.Duration(c.AuditCheckpointSeconds) * time.Second}
}
