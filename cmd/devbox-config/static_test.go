package main

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// The documented release build (scripts/build) makes one static binary: no
// dynamic loader (PT_INTERP), no dynamic section, no shared libraries. A
// default `go build` with cgo available links libc instead.
func TestReleaseBuildIsStatic(t *testing.T) {
	testbed.Integration(t, "builds the binary as releases are")
	if runtime.GOOS != "linux" {
		t.Skip("ELF check")
	}
	out := filepath.Join(t.TempDir(), "devbox-config")
	cmd := exec.Command(filepath.Join("..", "..", "scripts", "build"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the release binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if s := f.Section(".dynamic"); s != nil {
		t.Error("the release binary has a .dynamic section")
	}
	if s := f.Section(".interp"); s != nil {
		t.Error("the release binary has an .interp section")
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the release binary needs shared libraries: %v", libs)
	}
	if f.Section(".symtab") != nil {
		t.Error("the release binary is not stripped (-s -w)")
	}
}
