package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// pages are the documents a reader follows links between, relative to the
// repository root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md", "BENCHMARKS.md"}
	for _, d := range docs {
		out = append(out, filepath.Join("docs", d))
	}
	return out
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// prose is a Markdown document without its fenced code blocks.
func prose(md string) string {
	var b strings.Builder
	fenced := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// anchors are the heading slugs a Markdown renderer gives md's headings
// (lower case, punctuation dropped, spaces to hyphens).
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(prose(md), "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestLinksResolve: every link in the README, BENCHMARKS.md and docs/ names
// a file or directory in the repository (and, with #, a heading in it); the
// README links nowhere outside the repository, so it reads whole from a
// clone.
func TestLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		b, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(prose(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				if page == "README.md" {
					t.Errorf("%s links outside the repository: %s (say it in the repository, or name it without a link)", page, target)
				}
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join("..", page) // a link to this page's own heading
			if file != "" {
				path = filepath.Join("..", filepath.Dir(page), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: no such file or directory in the repository", page, target)
				continue
			}
			if anchor == "" {
				continue
			}
			md, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: link %s: %v", page, target, err)
				continue
			}
			if !anchors(string(md))[anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, file, anchor)
			}
		}
	}
}

// TestREADMEIsShort: the README is the way in, at most 150 lines; what
// goes deeper belongs in docs/.
func TestREADMEIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 150 {
		t.Errorf("README.md is %d lines; at most 150 (move the detail into docs/)", n)
	}
}

// The section the stores' refusal of a newer file names
// (sqlitewal.UpgradeDoc) is in the operator's guide.
func TestTheUpgradeSectionTheStoresNameExists(t *testing.T) {
	page, anchor, _ := strings.Cut(sqlitewal.UpgradeDoc, "#")
	md, err := os.ReadFile(filepath.Join("..", page))
	if err != nil {
		t.Fatal(err)
	}
	if !anchors(string(md))[anchor] {
		t.Errorf("%s has no heading for #%s", page, anchor)
	}
}

// TestRFCCitationsLinkTheRFC: a page that cites "RFC 001" or "RFC 003" links
// the RFC's file in docs/rfc/, so the reader can follow the citation (cli.md,
// generated from --help, is exempt: it keeps the plain "RFC 001 §x").
func TestRFCCitationsLinkTheRFC(t *testing.T) {
	files := map[string]string{"RFC 001": "rfc-001-global-palace.md", "RFC 003": "rfc-003-coordination-log.md"}
	for _, page := range pages(t) {
		if page == filepath.Join("docs", "cli.md") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(prose(string(b))), " ")
		for rfc, file := range files {
			if strings.Contains(text, rfc) && !strings.Contains(text, "(rfc/"+file) {
				t.Errorf("%s cites %s but never links docs/rfc/%s", page, rfc, file)
			}
		}
	}
}

// TestOperatorGuideNamesEveryDoctorFinding: every finding id doctor can emit
// (doctor.Catalogue, which `doctor --help` prints) is explained in
// operator.md's Doctor section, so a script's author finds each one.
func TestOperatorGuideNamesEveryDoctorFinding(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "operator.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n## Doctor")
	for _, k := range doctor.Catalogue() {
		for _, id := range k.IDs {
			if !strings.Contains(section, "`"+id+"`") {
				t.Errorf("operator.md's Doctor section does not name the finding `%s`", id)
			}
		}
	}
}
