package realpalace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// groups are the process groups (keys, by pgid) of one palace's running
// processes: a process that names the palace in one of them is not left
// behind, it is running on purpose.
type groups = sync.Map

// proc is one MemPalace process, the leader of its own process group so
// that what it starts (serve's server child) is stopped with it.
type proc struct {
	cmd    *exec.Cmd
	log    *testbed.SyncBuffer
	done   chan struct{} // closed when Wait returned
	mark   string        // a path every process of this palace names (leftover check)
	groups *groups       // the palace's running groups
	waited error
}

func startProc(argv, env []string, mark string, g *groups, stdin io.Reader, stdout io.Writer) (*proc, error) {
	p := &proc{log: &testbed.SyncBuffer{}, done: make(chan struct{}), mark: mark, groups: g}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, mark
	cmd.Stdin, cmd.Stderr = stdin, p.log
	cmd.Stdout = stdout
	if stdout == nil {
		cmd.Stdout = p.log
	}
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	p.cmd = cmd
	g.Store(cmd.Process.Pid, true)
	go func() { p.waited = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the whole process group: SIGTERM, then SIGKILL after grace.
// It returns an error naming any process of this palace still alive
// afterwards.
func (p *proc) stop(grace time.Duration) error {
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM) // ESRCH: already gone
	select {
	case <-p.done:
	case <-time.After(grace):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	return p.leftovers(pgid)
}

// kill ends the process group at once (SIGKILL), as a crash would.
func (p *proc) kill() error {
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
	return p.leftovers(pgid)
}

// leftovers waits up to 5 s for every process of the group, and every
// process outside the palace's other running groups whose command line
// or working directory names this palace's scratch directory, to be gone (a SIGKILLed leader's children are killed
// with the group but may take a moment to be reaped).
func (p *proc) leftovers(pgid int) error {
	defer p.groups.Delete(pgid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := p.alive(pgid)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL) // leave nothing running, but say so
			}
			return fmt.Errorf("left behind after stopping %s: %s", filepath.Base(p.cmd.Path), strings.Join(left2s(left), "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func left2s(pids []int) []string {
	var out []string
	for _, pid := range pids {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("pid %d %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
	}
	return out
}

// alive lists live (not zombie) processes in group pgid or naming mark.
func (p *proc) alive(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil // not Linux: the group signal is all there is
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:])) // state ppid pgrp ...
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		if _, live := p.groups.Load(pgrp); live && pgrp != pgid {
			continue // another of this palace's processes, running on purpose
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if pgrp == pgid || bytes.Contains(cmdline, []byte(p.mark)) || cwd == p.mark || strings.HasPrefix(cwd, p.mark+"/") {
			out = append(out, pid)
		}
	}
	return out
}

// errExited: the process ended before it was ready.
var errExited = errors.New("exited before it was ready")
