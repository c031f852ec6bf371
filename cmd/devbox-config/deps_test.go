package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// depsHeader opens testdata/deps.txt.
const depsHeader = `# Every package the release binary links, but the standard library's
# internals: go list -deps with CGO_ENABLED=0 GOOS=linux GOARCH=amd64.
# Each one's init runs at every container start (render's included), so
# a new one is a decision: TestLinkedPackages fails until this list is
# updated on purpose with
#   UPDATE_DEPS=1 go test ./cmd/devbox-config -run TestLinkedPackages
# and the commit says why (BENCHMARKS.md has what start-up costs).
`

// TestLinkedPackages guards start-up cost the way tailscale's depaware
// does: the packages the binary links are a checked-in list, and a package
// that appears in (or leaves) the binary fails the test until the list is
// updated on purpose. It runs go list (no build), so it is in the fast tier.
func TestLinkedPackages(t *testing.T) {
	t.Parallel()
	out, err := goListDeps()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range out {
		if p.std && (strings.Contains(p.path+"/", "internal/") || strings.HasPrefix(p.path, "vendor/")) {
			continue // the standard library's internals change with every Go release
		}
		got = append(got, p.path)
	}
	slices.Sort(got)
	for _, p := range got {
		if strings.HasSuffix(p, "/fakepalace") {
			t.Errorf("devbox-config links the fakepalace test double (%s)", p)
		}
	}
	file := filepath.Join("testdata", "deps.txt")
	if os.Getenv("UPDATE_DEPS") == "1" {
		if err := os.WriteFile(file, []byte(depsHeader+strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	slices.Sort(want)
	added, removed := setDiff(got, want), setDiff(want, got)
	if len(added)+len(removed) > 0 {
		t.Errorf("the packages devbox-config links changed: every linked package's init runs at every container start.\n"+
			"new: %s\ngone: %s\nIf this is on purpose, update %s with\n  UPDATE_DEPS=1 go test ./cmd/devbox-config -run TestLinkedPackages\nand say why in the commit.",
			list(added), list(removed), file)
	}
}

type goPackage struct {
	path string
	std  bool
}

// goListDeps is `go list -deps .` as the release is built.
func goListDeps() ([]goPackage, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.Standard}} {{.ImportPath}}", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return nil, fmt.Errorf("go list -deps: %v\n%s", err, stderr)
	}
	var pkgs []goPackage
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		std, path, _ := strings.Cut(l, " ")
		pkgs = append(pkgs, goPackage{path: path, std: std == "true"})
	}
	return pkgs, nil
}

// setDiff is what a has and b does not (both sorted).
func setDiff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
