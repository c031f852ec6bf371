// Package fingerprint hashes a managed JSON subtree in canonical form and
// keeps the record of what devbox-config last wrote, in a small state file
// stored beside the configs it describes (so it lives on the same volume and
// travels with them).
//
// The hash covers the parsed value, not the file's bytes: both harnesses
// reformat their files, and a byte hash would mistake reformatting for an
// edit (shared/reference/harness-config.md §4.7).
package fingerprint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Absent is the fingerprint recorded when devbox-config decided that the
// subtree must not exist (R5: no local server to register). It can never
// collide with a hash.
const Absent = "absent"

// Canonical returns raw JSON in canonical form: object keys sorted, no
// insignificant whitespace, numbers exactly as written, no HTML escaping.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("canonical JSON: trailing data after the value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // encoding/json sorts map keys
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Of returns "sha256:<hex>" of the canonical form of raw, or Absent for a
// nil value.
func Of(raw []byte) (string, error) {
	if raw == nil {
		return Absent, nil
	}
	c, err := Canonical(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Equal reports whether two JSON values are the same after
// canonicalisation. nil means absent.
func Equal(a, b []byte) (bool, error) {
	fa, err := Of(a)
	if err != nil {
		return false, err
	}
	fb, err := Of(b)
	return err == nil && fa == fb, err
}

// StateFile is the name of the record file, kept in the same directory as
// the configs it describes.
const StateFile = ".devbox-config.json"

// Record is what devbox-config last wrote into one target's managed subtree.
type Record struct {
	// File is the base name of the config file the subtree lives in.
	File string `json:"file"`
	// Pointer is the RFC 6901 pointer of the managed subtree.
	Pointer string `json:"pointer"`
	// Fingerprint is Of(the value last written), or Absent.
	Fingerprint string `json:"fingerprint"`
	// Mode is the ladder rung that produced the value (for humans).
	Mode string `json:"mode"`
	// WrittenAt is when the record last changed (for humans).
	WrittenAt time.Time `json:"written_at"`
	// Pending is the fingerprint of a value devbox-config was about to
	// write when it recorded this; it is cleared once the write is
	// confirmed. After a kill between the write and the confirmation the
	// live value matches either Fingerprint (the write did not happen) or
	// Pending (it did), and both are devbox-config's own.
	Pending string `json:"pending,omitempty"`
	// Inserted: devbox-config added the entry, in a remote or edge rung,
	// where the file had none; it stays set while the entry follows the
	// environment. Going back to solitary removes such an entry from an
	// opt-in harness (the user had none before opting in) instead of
	// making it a stdio one (opencode and pi-mcp-adapter get the stdio
	// one the images wrote: R1).
	Inserted bool `json:"inserted,omitempty"`
	// Created is the pointer of the map devbox-config created, in a file
	// that had none, to hold an entry it inserted; removing the entry
	// removes the map again when it is left empty.
	Created string `json:"created,omitempty"`
	// Was is the text of the empty map the entry was inserted into: a
	// JSON object ("{}", "{ }") or a YAML key's line ("extensions:").
	// Removing the entry gives it that text back, so the file is its
	// bytes again.
	Was string `json:"was,omitempty"`
}

// Same reports whether two records say the same thing, ignoring the time.
func (r Record) Same(o Record) bool {
	return r.File == o.File && r.Pointer == o.Pointer && r.Fingerprint == o.Fingerprint && r.Mode == o.Mode && r.Pending == o.Pending && r.Inserted == o.Inserted &&
		r.Created == o.Created && r.Was == o.Was
}

// Ours returns the fingerprint of devbox-config's own value that the live
// value's fingerprint liveFP matches: Pending when the live value is the
// pending one (the write happened, its confirmation did not), else
// Fingerprint (which may be "": no record of a value).
func (r Record) Ours(liveFP string) string {
	if r.Pending != "" && liveFP == r.Pending {
		return r.Pending
	}
	return r.Fingerprint
}

// State is the content of StateFile.
type State struct {
	Version int               `json:"version"`
	Targets map[string]Record `json:"targets"`
}

const stateVersion = 1

// ParseState reads a state file. Empty input is an empty state.
func ParseState(b []byte) (State, error) {
	s := State{Version: stateVersion, Targets: map[string]Record{}}
	if len(bytes.TrimSpace(b)) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("state record: %w", err)
	}
	if s.Version != stateVersion {
		return State{}, fmt.Errorf("state record: version %d is not supported (want %d)", s.Version, stateVersion)
	}
	if s.Targets == nil {
		s.Targets = map[string]Record{}
	}
	return s, nil
}

// Marshal returns the state file's bytes: indented, newline-terminated.
func (s State) Marshal() []byte {
	s.Version = stateVersion
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil { // only plain strings and times: cannot fail
		panic(err)
	}
	return append(b, '\n')
}
