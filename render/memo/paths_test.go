package memo

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/filewrite"
)

func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "/", "//", "a/../..", "/../a", "./a/./b/", "a//b", "../../x/..", "/a/b/../../..", ".", ".."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if got, want := clean(p), filepath.Clean(p); got != want {
			t.Fatalf("clean(%q) = %q, filepath.Clean = %q", p, got, want)
		}
	})
}

// tree builds a random tree of directories, files (some executable) and
// symlinks (absolute, relative, dangling, looping) under root from seed,
// and returns paths to ask about, some through links and "..".
func tree(t *testing.T, root string, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	names := []string{"a", "b", "c", "bin", "x y", "l"}
	var dirs = []string{root}
	var all []string
	for i := 0; i < 12; i++ {
		parent := dirs[r.IntN(len(dirs))]
		p := filepath.Join(parent, names[r.IntN(len(names))]+strconv.Itoa(i%4))
		switch r.IntN(5) {
		case 0, 1:
			if os.Mkdir(p, 0o755) == nil {
				dirs = append(dirs, p)
			}
		case 2:
			os.WriteFile(p, []byte("x"), []os.FileMode{0o644, 0o755, 0o700, 0o111}[r.IntN(4)])
		default:
			var target string
			switch r.IntN(4) {
			case 0:
				target = dirs[r.IntN(len(dirs))] // absolute
			case 1:
				target = ".." // relative, upwards
			case 2:
				target = names[r.IntN(len(names))] + strconv.Itoa(r.IntN(4)) // relative sibling, maybe dangling
			default:
				target = filepath.Base(p) // loop
			}
			os.Symlink(target, p)
		}
		all = append(all, p)
	}
	var asks []string
	for i := 0; i < 20; i++ {
		p := all[r.IntN(len(all))]
		switch r.IntN(4) {
		case 0:
			p = filepath.Join(p, names[r.IntN(len(names))]+strconv.Itoa(r.IntN(4)))
		case 1:
			p += "/.."
		case 2:
			p += "/./"
		}
		asks = append(asks, p)
	}
	return asks
}

func FuzzEvalSymlinks(f *testing.F) {
	for s := uint64(0); s < 40; s++ {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		root := t.TempDir()
		for _, p := range tree(t, root, seed) {
			got, gerr := evalSymlinks(p)
			want, werr := filepath.EvalSymlinks(p)
			if got != want || (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
				t.Fatalf("evalSymlinks(%q) = %q, %v; filepath.EvalSymlinks = %q, %v", p, got, gerr, want, werr)
			}
		}
	})
}

func FuzzLookPath(f *testing.F) {
	for s := uint64(0); s < 40; s++ {
		f.Add(s, "a0")
	}
	f.Add(uint64(1), "bin1")
	f.Fuzz(func(t *testing.T, seed uint64, name string) {
		root := t.TempDir()
		asks := tree(t, root, seed)
		r := rand.New(rand.NewPCG(seed, 7))
		var dirs []string
		for i := r.IntN(5); i >= 0; i-- {
			switch r.IntN(6) {
			case 0:
				dirs = append(dirs, "") // "." by shell rules
			case 1:
				dirs = append(dirs, "rel/"+strconv.Itoa(i))
			default:
				dirs = append(dirs, filepath.Dir(asks[r.IntN(len(asks))]))
			}
		}
		pathEnv := strings.Join(dirs, ":")
		t.Setenv("PATH", pathEnv)
		cwd, _ := os.Getwd()
		defer os.Chdir(cwd)
		os.Chdir(root)
		got, found, ok := lookPath(name, pathEnv)
		want, err := exec.LookPath(name)
		if !ok {
			return // a name the port refuses: Check treats it as changed
		}
		if got != want || found != (err == nil) {
			t.Fatalf("PATH=%q lookPath(%q) = %q found=%v; exec.LookPath = %q, %v", pathEnv, name, got, found, want, err)
		}
		if err != nil && !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, exec.ErrDot) {
			t.Fatalf("exec.LookPath error %v is neither not-found nor ErrDot", err)
		}
	})
}

// The memo's scan sees exactly the names filewrite writes or cleans as
// temp files: a start with a temp file to clean always plans, and a user's
// own ".history.tmp" does not turn the memo off.
func FuzzLooksTempIsTempTarget(f *testing.F) {
	for _, s := range []string{filewrite.TempName("opencode.jsonc"), ".x.tmp1", ".a.tmp-0123456789abcdef", "x.tmp", ".tmp", ".bash_history.tmp", ".a.tmp.tmp1", ".ab.tmp-0123456789ABCDEF"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if _, ok := filewrite.TempTarget(name); ok != LooksTemp(name) {
			t.Fatalf("filewrite.TempTarget(%q) ok=%v, LooksTemp %v", name, ok, !ok)
		}
	})
}
