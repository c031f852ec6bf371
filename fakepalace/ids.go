// Package fakepalace is a faithful MemPalace test double, built from the
// facts in shared/reference/mempalace-surface.md (which cite upstream
// 3.6.0–3.10 source line by line). It serves the same tool names, schemas,
// id recipes, result shapes and wire behaviour over stdio and HTTP, keeps
// its state in a directory, and can inject the faults the edge must
// survive. It is never linked into the devbox-config binary.
package fakepalace

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/joakimp/devbox-config/catalogue"
)

// ChunkSize is MemPalace's MCP chunk size (config.chunk_size default, no
// overlap for MCP writes).
const ChunkSize = 800

// MaxContent is sanitize_content's limit.
const MaxContent = 100000

// DrawerID is make_drawer_id_from_content: drawer_{wing}_{room}_{h24}.
// The recipe is the catalogue's (the edge orders writes by it), so the
// contract suite's run against real MemPalace checks the one copy.
func DrawerID(wing, room, content string) string { return catalogue.DrawerID(wing, room, content) }

// DiaryID is tool_diary_write's id: a microsecond local timestamp and the
// first 12 hex of sha256(entry) (not length-prefixed).
func DiaryID(wing string, now time.Time, entry string) string {
	return fmt.Sprintf("diary_%s_%s%06d_%s", wing, now.Format("20060102_150405"), now.Nanosecond()/1000, catalogue.EntrySuffix(entry))
}

// DiarySuffix is the content key of a diary id: sha256(entry)[:12].
func DiarySuffix(entry string) string { return catalogue.EntrySuffix(entry) }

// chunks splits content into ChunkSize-character pieces (code points).
func chunks(content string) []string {
	r := []rune(content)
	if len(r) <= ChunkSize {
		return []string{content}
	}
	var out []string
	for i := 0; i < len(r); i += ChunkSize {
		end := min(i+ChunkSize, len(r))
		out = append(out, string(r[i:end]))
	}
	return out
}

var nameRE = regexp.MustCompile(`^(?:[\pL\pN]|[\pL\pN][\pL\pN_ .'-]{0,126}[\pL\pN])$`)

// sanitizeName is sanitize_name: wing, room, agent, topic, predicate.
func sanitizeName(field, v string) error {
	if v == "" {
		return fmt.Errorf("%s must be a non-empty string", field)
	}
	if utf8.RuneCountInString(v) > 128 {
		return fmt.Errorf("%s exceeds maximum length of 128 characters", field)
	}
	if strings.Contains(v, "..") || strings.ContainsAny(v, "/\\\x00") || !nameRE.MatchString(v) {
		return fmt.Errorf("%s contains invalid characters", field)
	}
	return nil
}

// kgDate accepts YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ (+00:00 normalised).
func kgDate(field, v string) (string, error) {
	if v == "" {
		return "", nil
	}
	v = strings.Replace(v, "+00:00", "Z", 1)
	if _, err := time.Parse("2006-01-02", v); err == nil {
		return v, nil
	}
	if _, err := time.Parse("2006-01-02T15:04:05Z", v); err == nil {
		return v, nil
	}
	return "", fmt.Errorf("%s='%s' is not a valid ISO-8601 date or UTC datetime (expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ)", field, v)
}
