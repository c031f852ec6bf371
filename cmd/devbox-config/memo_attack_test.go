package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/render/memo"
	"github.com/joakimp/devbox-config/testbed"
)

// Attacks on the start memo (render/memo). Each test states the guarantee
// it expects and fails while the memo breaks it.

const attackToken = "attack-token-5c1d"

// attackHome is a home rendered once in remote mode (so that the next start
// changes nothing and saves a memo), with the environment to run it with.
func attackHome(t *testing.T, bin string) (home string, env []string) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "home")
	oc := filepath.Join(home, ".config/opencode/opencode.jsonc")
	os.MkdirAll(filepath.Dir(oc), 0o755)
	os.WriteFile(oc, []byte("{\n  // mine\n  \"model\": \"x/y\"\n}\n"), 0o644)
	env = []string{"HOME=" + home, "PATH=/usr/bin:/bin",
		"MEMPALACE_REMOTE_URL=https://palace.example.org/mcp", "MEMPALACE_REMOTE_TOKEN=" + attackToken}
	if r := runRender(t, bin, home, env, "--home", home); r.code != 0 || r.answered {
		t.Fatalf("first render: exit %d answered %v\n%s", r.code, r.answered, r.stderr)
	}
	return home, env
}

// attackBin builds the binary for a test that must run as root (why says
// what for).
func attackBin(t *testing.T, why string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, " + why)
	}
	return testbed.Build(t, "./cmd/devbox-config", "devbox-config")
}

func memoPath(home string) string { return filepath.Join(home, ".cache/devbox-config/render-memo") }

// Finding 1: the memo is written with filewrite.Write, which follows a
// symlink at the memo path and replaces the file it points to (keeping that
// file's owner and mode). Whoever owns the home (or its ~/.cache) can point
// render-memo at any file; a render run as root over that home
// (`render --home /home/u`, as a container start does) then overwrites it
// with the memo: /etc/passwd, /root/.bashrc, another user's file.
func TestAttackMemoWriteFollowsAPlantedSymlink(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	home, env := attackHome(t, bin)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
	os.MkdirAll(filepath.Dir(memoPath(home)), 0o700)
	os.Remove(memoPath(home)) // the first start kept one
	if err := os.Symlink(victim, memoPath(home)); err != nil {
		t.Fatal(err)
	}
	r := runRender(t, bin, home, env, "--home", home)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root:x:0:0:root:/root:/bin/bash\n" {
		t.Errorf("saving the memo overwrote the file a symlink at the memo path points to; it now holds\n%.200s", b)
	}
}

// Finding 1b: the same through a directory: ~/.cache (or
// ~/.cache/devbox-config) a symlink another user planted, to a directory
// outside the home, makes the memo land there (MkdirAll and Write follow
// it). (A user's own ~/.cache link to another disk is theirs to follow.)
func TestAttackMemoWriteFollowsASymlinkedCacheDir(t *testing.T) {
	bin := attackBin(t, "to plant the link as another user")
	home, env := attackHome(t, bin)
	outside := t.TempDir()
	os.RemoveAll(filepath.Join(home, ".cache"))
	if err := os.Symlink(outside, filepath.Join(home, ".cache")); err != nil {
		t.Fatal(err)
	}
	os.Lchown(filepath.Join(home, ".cache"), 12345, 12345)
	runRender(t, bin, home, env, "--home", home)
	if _, err := os.Lstat(filepath.Join(outside, "devbox-config", "render-memo")); err == nil {
		t.Errorf("the memo was written outside the home, through a symlinked %s", filepath.Join(home, ".cache"))
	}
}

// Finding 2: render run as root over a user's home (--home) creates
// ~/.cache and ~/.cache/devbox-config owned by root, mode 0700: the user
// loses their own cache directory (every XDG application of theirs then
// fails to write under ~/.cache).
func TestAttackRootRenderCreatesRootOwnedCacheInUsersHome(t *testing.T) {
	bin := attackBin(t, "to own the home as another user")
	home, env := attackHome(t, bin)
	const uid, gid = 12345, 12345
	filepath.Walk(home, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })
	os.RemoveAll(filepath.Join(home, ".cache"))
	r := runRender(t, bin, home, env, "--home", home)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, d := range []string{".cache", ".cache/devbox-config", ".cache/devbox-config/render-memo"} {
		fi, err := os.Lstat(filepath.Join(home, d))
		if err != nil {
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid {
			t.Errorf("%s in the user's home is owned by uid %d (mode %v), not by the home's owner %d", d, st.Uid, fi.Mode(), uid)
		}
	}
}

// forgedMemo is a memo that answers any start of bin with args: it lists
// no inputs at all, and Check trusts the memo's own list.
func forgedMemo(t *testing.T, bin string, args []string, exit int, stderr string) []byte {
	t.Helper()
	p, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	p, _ = filepath.Abs(p)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	b := fmt.Sprintf("devbox-config render memo 3\nbinary %q %d %d %d %q\n", p, fi.Size(), fi.ModTime().UnixNano(), st.Ino, buildIDOf(t, p))
	for _, a := range args {
		b += "arg " + strconv.Quote(a) + "\n"
	}
	b += "exit " + strconv.Itoa(exit) + "\nstderr " + strconv.Quote(stderr) + "\n"
	return []byte(b)
}

func buildIDOf(t *testing.T, bin string) string {
	out, err := exec.Command("go", "tool", "buildid", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(out))
}

// Finding 3: a memo is trusted whoever wrote it. Load checks neither the
// file's owner nor that its inputs cover what render reads, and parse
// accepts any exit status: the owner of a home can make a root render over
// it (or anyone who can write $XDG_CACHE_HOME can make any render) skip
// entirely, print what they like and exit with any status, e.g. failing
// the container start that render promises never to fail.
func TestAttackForgedMemoAnswersAStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	for _, exit := range []int{137, 0} {
		if exit == 0 && os.Geteuid() != 0 {
			continue // a user's own memo with exit 0 is theirs to forge; the owner check needs root
		}
		home, env := attackHome(t, bin)
		args := []string{"--home", home}
		os.MkdirAll(filepath.Dir(memoPath(home)), 0o700)
		os.WriteFile(memoPath(home), forgedMemo(t, bin, append([]string{"render"}, args...), exit, "level=INFO msg=\"all good\"\n"), 0o600)
		if os.Geteuid() == 0 {
			os.Chown(memoPath(home), 12345, 12345) // the home's owner wrote it
		}
		// The environment changed: a full run rewrites the configs.
		env = append(env, "MEMPALACE_EDGE=1")
		r := runRender(t, bin, home, env, args...)
		if r.answered || r.code != 0 {
			t.Errorf("a forged memo (no inputs, exit %d, owned by another user) answered the start: answered=%v exit %d stderr %q", exit, r.answered, r.code, r.stderr)
		}
	}
}

// Finding 4 (low): a build is told from another only by path, size, mtime
// and inode. A release installed over the old one in place (`cp -p`, which
// keeps the inode and copies the mtime) from a reproducible build (a fixed
// SOURCE_DATE_EPOCH mtime) of the same size (a version string bumped, a
// constant changed) is answered from the old build's memo, although
// memo.Binary promises that another build plans again.
func TestAttackAnotherBuildOfTheSameSizeIsAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	build := func(v string) string {
		out := filepath.Join(dir, "devbox-config-"+v)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+v, "-o", out, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		return out
	}
	oldBuild, newBuild := build("1.0.0-aaaa"), build("1.0.0-bbbb")
	a, _ := os.ReadFile(oldBuild)
	b, _ := os.ReadFile(newBuild)
	if len(a) != len(b) || bytes.Equal(a, b) {
		t.Skipf("the two builds are %d and %d bytes", len(a), len(b))
	}
	bin := filepath.Join(dir, "bin", "devbox-config")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, a, 0o755)
	epoch := time.Unix(1700000000, 0)
	os.Chtimes(bin, epoch, epoch)

	home, env := attackHome(t, bin)
	if r := runRender(t, bin, home, env, "--home", home); !r.answered || r.code != 0 {
		t.Fatalf("the old build's second start was not answered from its memo: answered=%v exit %d", r.answered, r.code)
	}
	// cp -p new-release /usr/local/bin/devbox-config
	f, err := os.OpenFile(bin, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b)
	f.Close()
	os.Chtimes(bin, epoch, epoch)
	if out, _ := exec.Command(bin, "version").Output(); !bytes.Contains(out, []byte("bbbb")) {
		t.Fatalf("the new build is not in place: %s", out)
	}
	if r := runRender(t, bin, home, env, "--home", home); r.answered {
		t.Errorf("another build (version 1.0.0-bbbb) was answered from the memo version 1.0.0-aaaa saved")
	}
}

// Finding 5 (low): only MEMPALACE_*TOKEN is kept out of the memo as
// blank/non-blank; every other variable is summed with FNV-128a, a fast
// unsalted non-cryptographic hash. A MEMPALACE_REMOTE_URL that carries
// credentials (https://user:password@host, which render refuses and never
// writes to a config) therefore lands in the memo as a sum anyone who can
// read the memo can test password guesses against offline, at billions a
// second.
func TestAttackCredentialsInTheURLAreSummedIntoTheMemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	home, env := attackHome(t, bin)
	const url = "https://memo:hunter2@palace.example.org/mcp"
	env = append(env, "MEMPALACE_REMOTE_URL="+url) // the later one wins
	runRender(t, bin, home, env, "--home", home)
	runRender(t, bin, home, env, "--home", home)
	b, err := os.ReadFile(memoPath(home))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	// No memo is kept for such a start (render refuses the URL and warns
	// at every start anyway); if one were, it must not hold the sum.
	if bytes.Contains(b, []byte(memo.Sum([]byte(url)))) {
		t.Errorf("the memo holds FNV-128a(%q): the password can be guessed offline from it", url)
	}
}

// Finding 6 (low): a start killed while saving the memo leaves
// filewrite's temp file beside it, and nothing ever removes it (cleanTemps
// scans only the targets' directories): every such kill adds one file to
// ~/.cache/devbox-config for good.
func TestAttackAKilledMemoWritesTempFileIsNeverCleaned(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	home, env := attackHome(t, bin)
	tmp := filepath.Join(filepath.Dir(memoPath(home)), ".render-memo.tmp-00000000000000ff")
	os.MkdirAll(filepath.Dir(tmp), 0o700)
	os.WriteFile(tmp, []byte("devbox-config render memo 2\nbinary"), 0o600)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(tmp, old, old)
	for i := 0; i < 3; i++ {
		runRender(t, bin, home, env, "--home", home)
	}
	if _, err := os.Lstat(tmp); err == nil {
		t.Errorf("a killed memo write's stale temp file %s is still there after three starts", tmp)
	}
}
