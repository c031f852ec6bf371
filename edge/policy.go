package edge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/confpos"
)

// Policy is <palace>/edge/policy.json: which wings replicate to the primary
// (RFC 001 §5). Everything is replicated except what the file marks local;
// drawers from mine never enter the outbox anyway (mine is local-only).
//
//	{
//	  "version": 1,
//	  "wings": {
//	    "workspace": {"replicate": "local"},
//	    "wing_private_*": {"replicate": "local"}
//	  },
//	  "kg": {"replicate": "replicated"}
//	}
//
// Keys of "wings" are path.Match globs; the most specific (longest) match
// wins. Each rule is an object so that a wing can later name its own
// primary ("target", RFC 001 §9.7) without breaking existing files.
type Policy struct {
	Version int             `json:"version"`
	Wings   map[string]Rule `json:"wings"`
	KG      *Rule           `json:"kg,omitempty"`
}

// Rule is one wing's policy.
type Rule struct {
	Replicate Replication `json:"replicate"`
	// Target is reserved for per-wing primaries; it must be empty for now.
	Target string `json:"target,omitempty"`
}

// Replication is a rule's answer: Replicated or Local.
type Replication string

const (
	// Replicated: writes go to the primary too (through the outbox).
	Replicated Replication = "replicated"
	// Local: writes stay in the local palace.
	Local Replication = "local"
)

// PolicyFile is the policy's name inside <palace>/edge.
const PolicyFile = "policy.json"

// LoadPolicy reads the policy; a missing file is "replicate everything".
// Errors name the file, the line and column, the field and the fix.
func LoadPolicy(dir string) (*Policy, error) {
	p := &Policy{Version: 1, Wings: map[string]Rule{}}
	file := filepath.Join(dir, PolicyFile)
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := (confpos.JSON{Strict: true}).DecodeJSON(file, b, p); err != nil {
		return nil, err
	}
	refuse := func(fix, format string, args ...any) error {
		return confpos.Placed(file, b, fmt.Errorf(format, args...), fix)
	}
	if p.Version != 1 {
		return nil, refuse(`set "version": 1`, "version: %d is not supported (want 1)", p.Version)
	}
	check := func(field string, r Rule) error {
		if r.Replicate != Replicated && r.Replicate != Local {
			return refuse(fmt.Sprintf("%q keeps its writes on this device, %q sends them to the primary too", Local, Replicated),
				"%s.replicate: %q must be %q or %q", field, r.Replicate, Replicated, Local)
		}
		if r.Target != "" {
			return refuse(`remove "target"`, "%s.target: per-wing primaries are not supported yet; leave it out", field)
		}
		return nil
	}
	for glob, r := range p.Wings {
		if _, err := path.Match(glob, "x"); err != nil {
			return nil, refuse("a glob is a wing's name with * for any run of characters, ? for one, [abc] for one of those; close every [ and end no glob with a lone \\",
				"wings[%q]: bad glob: %w", glob, err)
		}
		if err := check(fmt.Sprintf("wings[%q]", glob), r); err != nil {
			return nil, err
		}
	}
	if p.KG != nil {
		if err := check("kg", *p.KG); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Replicated reports whether writes to wing go to the primary: the wing
// as MemPalace files it (" wing_private_x" is wing_private_x there).
func (p *Policy) Replicated(wing string) bool {
	wing = catalogue.SanitizedName(wing)
	best, bestLen := Replicated, -1
	for glob, r := range p.Wings {
		if ok, _ := path.Match(glob, wing); ok && len(glob) > bestLen { // LoadPolicy checked every glob
			best, bestLen = r.Replicate, len(glob)
		}
	}
	return best == Replicated
}

// KGReplicated reports whether knowledge-graph writes go to the primary.
func (p *Policy) KGReplicated() bool { return p.KG == nil || p.KG.Replicate == Replicated }
