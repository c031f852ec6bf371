package testbed

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// tmpfsMagic is statfs(2)'s f_type of a tmpfs.
const tmpfsMagic = 0x01021994

type onTmpfs struct{ m TestingM }

// OnTmpfs wraps a TestMain's m so that, in the unit tier (-short), the
// tests' temporary files (TMPDIR: t.TempDir, and every child a test
// starts) are on a tmpfs, in a fresh directory under /dev/shm removed when
// the tests have run. The outboxes, ledgers and palaces the tests make
// fsync on every commit; on a tmpfs fsync returns at once, which halves
// the tests' system time (BENCHMARKS.md, "Test tiers"). Where /dev/shm is
// not a writable tmpfs, or in the integration tier (which keeps the disk
// a user's palace is on), nothing changes; the race tier runs -short too,
// so it gets the tmpfs.
func OnTmpfs(m TestingM) TestingM { return onTmpfs{m} }

func (o onTmpfs) Run() int {
	if !flag.Parsed() {
		flag.Parse() // testing.Short needs it; m.Run parses again, as WaitingTests's caller does
	}
	var st syscall.Statfs_t
	if !testing.Short() || syscall.Statfs("/dev/shm", &st) != nil || int64(st.Type) != tmpfsMagic {
		return o.m.Run()
	}
	sweepTmpfs()
	dir, err := os.MkdirTemp("/dev/shm", tmpfsPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return o.m.Run() // a read-only or full /dev/shm: the disk, as before
	}
	was, had := os.LookupEnv("TMPDIR")
	os.Setenv("TMPDIR", dir) // cannot fail with this name
	code := o.m.Run()
	if had {
		os.Setenv("TMPDIR", was)
	} else {
		os.Unsetenv("TMPDIR")
	}
	if err := os.RemoveAll(dir); err != nil {
		os.Stderr.WriteString("testbed: removing the tests' temporary directory: " + err.Error() + "\n")
	}
	return code
}

// tmpfsPrefix begins the name of a test process's directory under
// /dev/shm, followed by its pid.
const tmpfsPrefix = "devbox-config-test-"

// sweepTmpfs removes the directories of test processes that are gone (a
// panic, a -timeout or a kill skips the removal, and /dev/shm is memory).
func sweepTmpfs() {
	dirs, _ := filepath.Glob("/dev/shm/" + tmpfsPrefix + "*") // a bad pattern is the only error
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), tmpfsPrefix), "-", 2)[0])
		if err != nil || syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(d) // best effort: another sweep tries again
		}
	}
}
