package fakepalace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Drawer is one logical drawer (add_drawer, checkpoint item, or diary
// entry). Chunk rows are derived from Content.
type Drawer struct {
	ID         string `json:"drawer_id"`
	Wing       string `json:"wing"`
	Room       string `json:"room"`
	Content    string `json:"content"`
	SourceFile string `json:"source_file"`
	AddedBy    string `json:"added_by"`
	FiledAt    string `json:"filed_at"`
	// Modified is when update_drawer last changed it ("": never).
	Modified string `json:"last_modified,omitempty"`
	// Diary entries only.
	Diary bool   `json:"diary,omitempty"`
	Agent string `json:"agent,omitempty"`
	Topic string `json:"topic,omitempty"`
	Date  string `json:"date,omitempty"`
	// Seq orders drawers by arrival (diary_read newest first).
	Seq int64 `json:"seq"`
}

// ChunkIDs returns the drawer's chunk ids, {logical_id}_chunk_{index:06d},
// or nil for a one-chunk drawer.
func (d Drawer) ChunkIDs() []string {
	parts := chunks(d.Content)
	if len(parts) == 1 {
		return nil
	}
	ids := make([]string, len(parts))
	for i := range parts {
		ids[i] = fmt.Sprintf("%s_chunk_%06d", d.ID, i)
	}
	return ids
}

// Triple is a knowledge-graph fact.
type Triple struct {
	ID             string  `json:"id"`
	Subject        string  `json:"subject"`
	Predicate      string  `json:"predicate"`
	Object         string  `json:"object"`
	ValidFrom      *string `json:"valid_from"`
	ValidTo        *string `json:"valid_to"`
	Confidence     float64 `json:"confidence"`
	SourceCloset   *string `json:"source_closet"`
	SourceFile     *string `json:"source_file"`
	SourceDrawerID *string `json:"source_drawer_id"`
	RecordedAt     string  `json:"recorded_at"`
}

// Event is a logstream event (RFC 003 §3.1).
type Event struct {
	ID            string         `json:"id"`
	Seq           int64          `json:"seq"`
	OriginReplica string         `json:"origin_replica"`
	OriginSeq     int64          `json:"origin_seq"`
	HLC           string         `json:"hlc"`
	Type          string         `json:"type"`
	Stream        string         `json:"stream"`
	Room          string         `json:"room"`
	FromAgent     string         `json:"from_agent"`
	ToAgent       *string        `json:"to_agent"`
	CorrelationID *string        `json:"correlation_id"`
	Branch        *string        `json:"branch"`
	BaseCommit    *string        `json:"base_commit"`
	Status        *string        `json:"status"`
	Topic         *string        `json:"topic"`
	ArtifactIDs   []string       `json:"artifact_ids"`
	Body          string         `json:"body"`
	CreatedAt     string         `json:"created_at"`
	Metadata      map[string]any `json:"metadata"`
}

// Artifact is a logstream artifact.
type Artifact struct {
	ID            string         `json:"id"`
	Kind          string         `json:"kind"`
	SHA256        string         `json:"sha256"`
	SizeBytes     int            `json:"size_bytes"`
	Content       string         `json:"content"`
	CreatedBy     string         `json:"created_by"`
	CreatedAt     string         `json:"created_at"`
	OriginReplica string         `json:"origin_replica"`
	Metadata      map[string]any `json:"metadata"`
}

// State is everything a palace holds; Dump returns a copy for tests to
// compare final states.
type State struct {
	Drawers   map[string]*Drawer   `json:"drawers"`
	Triples   []*Triple            `json:"triples"`
	Events    []*Event             `json:"events"`
	Artifacts map[string]*Artifact `json:"artifacts"`
	ReplicaID string               `json:"replica_id"`
	NextSeq   int64                `json:"next_seq"`
	Hooks     map[string]bool      `json:"hooks"`
}

func newState() *State {
	return &State{Drawers: map[string]*Drawer{}, Artifacts: map[string]*Artifact{}, Hooks: map[string]bool{"silent_save": true, "desktop_toast": false}}
}

// SortedDrawers returns the drawers ordered by id.
func (s *State) SortedDrawers() []*Drawer {
	return slices.SortedFunc(maps.Values(s.Drawers), func(a, b *Drawer) int { return strings.Compare(a.ID, b.ID) })
}

// CountContent returns how many drawers hold exactly content (a write
// applied twice shows as 2).
func (s *State) CountContent(content string) int {
	n := 0
	for _, d := range s.Drawers {
		if d.Content == content {
			n++
		}
	}
	return n
}

const stateFile = "fakepalace.json"

// ReadDump reads the state a palace persisted in dir/fakepalace.json (for
// tests and the `fakepalace dump` command); a missing file is an empty
// palace.
func ReadDump(dir string) (*State, error) {
	s := newState()
	if dir == "" {
		return s, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	if s.Drawers == nil {
		s.Drawers = map[string]*Drawer{}
	}
	if s.Artifacts == nil {
		s.Artifacts = map[string]*Artifact{}
	}
	return s, nil
}

// save writes the state atomically.
func save(dir string, s *State) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	// A unique temp file: two processes sharing a palace (two edges' local
	// children) must not fail each other's saves. The last writer wins:
	// unlike MemPalace's locked stores, the double is not multi-writer safe.
	f, err := os.CreateTemp(dir, "."+stateFile+".tmp*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	f.Close()
	return os.Rename(f.Name(), filepath.Join(dir, stateFile))
}
