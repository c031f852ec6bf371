// Package edge is `devbox-config edge`: the harness's MCP server in edge
// mode (RFC 001 Phase 2). A local-first proxy: the local palace (a child
// mempalace-mcp) is always written, replicated writes go through a durable
// outbox to the primary, reads merge both, and with the primary down it
// degrades instead of failing. Tools never vanish.
package edge

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config is everything the edge reads from its environment.
type Config struct {
	// PrimaryURL is MEMPALACE_REMOTE_URL; empty means pass-through (R1).
	PrimaryURL string
	// Token returns MEMPALACE_REMOTE_TOKEN, read again on every connect so
	// a rotated token is picked up; never stored, never logged.
	Token func() string
	// Child is the local palace server's argv: exactly ["mempalace-mcp"]
	// unless MEMPALACE_EDGE_CHILD overrides it (RFC 001 §7.1: adding
	// --palace silently moves the knowledge graph).
	Child []string
	// ChildEnv is the child's environment (the edge's, without the token).
	ChildEnv []string
	// ChildStderr receives the child's log lines (default: os.Stderr).
	ChildStderr io.Writer
	// Palace is the palace directory; the edge's state lives in Palace/edge.
	Palace string
	// Agent, OriginDevice, OriginLabel stamp provenance on replicated writes.
	Agent, OriginDevice, OriginLabel string
	// CallTimeout bounds every call to the primary.
	CallTimeout time.Duration
	// Lease is how long a flusher holds the outbox before another process
	// may take over (MEMPALACE_EDGE_LEASE; default 10 s).
	Lease time.Duration
	Log   *slog.Logger
}

// StateDir is where the edge keeps its own files: <palace>/edge.
func (c Config) StateDir() string { return filepath.Join(c.Palace, "edge") }

// PassThrough reports R1 mode: no primary, a transparent proxy to the child.
func (c Config) PassThrough() bool { return c.PrimaryURL == "" }

// ConfigFromEnv reads the edge's configuration.
func ConfigFromEnv(getenv func(string) string, log *slog.Logger) (Config, error) {
	c := Config{
		PrimaryURL:   strings.TrimSpace(getenv("MEMPALACE_REMOTE_URL")),
		Token:        func() string { return strings.TrimSpace(getenv("MEMPALACE_REMOTE_TOKEN")) },
		Child:        []string{"mempalace-mcp"},
		Agent:        strings.TrimSpace(getenv("MEMPALACE_AGENT_NAME")),
		OriginDevice: strings.TrimSpace(getenv("MEMPALACE_ORIGIN_DEVICE")),
		OriginLabel:  strings.TrimSpace(getenv("MEMPALACE_ORIGIN_LABEL")),
		CallTimeout:  10 * time.Second,
		Log:          log,
	}
	if c.Agent == "" {
		c.Agent = strings.TrimSpace(getenv("MEMPALACE_EDGE_HARNESS"))
	}
	if v := strings.TrimSpace(getenv("MEMPALACE_EDGE_CHILD")); v != "" {
		c.Child = strings.Fields(v)
	}
	if v := strings.TrimSpace(getenv("MEMPALACE_EDGE_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("MEMPALACE_EDGE_TIMEOUT=%q: want a duration like 10s", v)
		}
		c.CallTimeout = d
	}
	if v := strings.TrimSpace(getenv("MEMPALACE_EDGE_LEASE")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond {
			return c, fmt.Errorf("MEMPALACE_EDGE_LEASE=%q: want a duration of at least 100ms", v)
		}
		c.Lease = d
	}
	palace, err := PalacePath(getenv)
	if err != nil {
		return c, err
	}
	c.Palace = palace
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMPALACE_REMOTE_TOKEN=") {
			c.ChildEnv = append(c.ChildEnv, kv)
		}
	}
	return c, nil
}

// PalacePath is MEMPALACE_PALACE_PATH, else palace_path in
// ~/.mempalace/config.json, else ~/.mempalace/palace (MemPalace's own
// precedence).
func PalacePath(getenv func(string) string) (string, error) {
	if p := strings.TrimSpace(getenv("MEMPALACE_PALACE_PATH")); p != "" {
		return p, nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no HOME to find the palace: %w", err)
		}
		home = h
	}
	cfgPath := filepath.Join(home, ".mempalace", "config.json")
	if b, err := os.ReadFile(cfgPath); err == nil {
		var cfg struct {
			PalacePath string `json:"palace_path"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return "", fmt.Errorf("%s: %w", cfgPath, err)
		}
		if cfg.PalacePath != "" {
			if strings.HasPrefix(cfg.PalacePath, "~/") {
				return filepath.Join(home, cfg.PalacePath[2:]), nil
			}
			return cfg.PalacePath, nil
		}
	}
	return filepath.Join(home, ".mempalace", "palace"), nil
}
