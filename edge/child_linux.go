package edge

import (
	"os/exec"
	"runtime"
	"syscall"
)

// dieWithEdge makes the local palace server get SIGKILL when the edge
// dies without stopping it (SIGKILL, the OOM killer, which run no
// cleanup): an orphan would go on holding the palace (its writer lock,
// SQLite and Chroma files) while the harness starts a second edge, and a
// second server, on it. Not SIGTERM: a server stuck in a call (chromadb
// on a full disk) ignores it, and with the edge gone nothing follows it
// with a SIGKILL. A stop the edge lives through sends SIGTERM first
// (childConn.Close); MemPalace's writer lock is an flock, which the
// kernel lets go at any death.
//
// The kernel sends the signal when the thread that started the server
// exits, not the process (prctl(2), PR_SET_PDEATHSIG; golang/go#27505),
// and Go ends a thread when a goroutine locked to it exits. So the
// starting goroutine is locked to its thread from the start until the
// returned unlock, called once the server has stopped: no other goroutine
// runs on that thread meanwhile, and this one does not exit locked.
func dieWithEdge(cmd *exec.Cmd) (unlock func()) {
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return runtime.UnlockOSThread
}
