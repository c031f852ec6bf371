package outbox

import (
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The doorbell wakes a sleeping flusher the moment any process sharing the
// palace enqueues, so an idle flusher needs no timer at all. Each running
// flusher binds a Unix datagram socket in <palace>/edge/doorbell/ (on the
// palace's volume, so containers sharing the volume on one host reach each
// other); Enqueue sends one byte to each. A socket nobody listens on any
// more (a process that was killed) refuses the byte and is removed. A
// socket's path must fit sun_path; on Linux a longer one is bound and
// dialled through its directory's /proc/self/fd link (atSocketDir), so a
// palace at any path has a doorbell. Elsewhere a flusher under a path too
// long polls instead.

// doorbellDir holds the flushers' sockets.
const doorbellDir = "doorbell"

// maxSocketPath is the longest path a Unix socket can be bound at or
// dialled by (sun_path is 108 bytes on Linux, 104 on the BSDs).
const maxSocketPath = 103

// errBellPathTooLong: the palace path leaves no room for a socket name
// (not on Linux).
var errBellPathTooLong = errors.New("the palace path is too long for a Unix socket")

// bell is one flusher's doorbell.
type bell struct {
	conn *net.UnixConn
	path string
	done chan struct{} // closed when its reader has stopped
}

// listenBell binds this flusher's doorbell; every byte received kicks the
// store's flusher. Close it when the flusher stops.
func (s *Store) listenBell() (*bell, error) {
	dir := filepath.Join(filepath.Dir(s.path), doorbellDir)
	b := make([]byte, 4)
	crand.Read(b) // never fails (crypto/rand)
	name := hex.EncodeToString(b) + ".sock"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var conn *net.UnixConn
	err := atSocketDir(dir, func(addr func(name string) string) (err error) {
		conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr(name), Net: "unixgram"})
		return err
	})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	s.mu.Lock()
	s.bell = path // ring skips it: this process wakes its own flusher (Kick)
	s.mu.Unlock()
	bl := &bell{conn: conn, path: path, done: make(chan struct{})}
	go func() {
		defer close(bl.done)
		buf := make([]byte, 16)
		for {
			if _, _, err := conn.ReadFromUnix(buf); err != nil {
				return // closed
			}
			s.Kick()
		}
	}()
	return bl, nil
}

// Close stops the bell and returns once its reader has stopped.
func (b *bell) Close() {
	b.conn.Close() // the reader's ReadFromUnix returns
	<-b.done
	// A socket that cannot be removed is removed by the next ring that
	// finds it refusing (ECONNREFUSED).
	_ = os.Remove(b.path)
}

// ringAll wakes this process's flusher (Kick) and rings every other
// flusher's doorbell (ringOthers).
func (s *Store) ringAll() {
	s.Kick()
	s.ringOthers()
}

// ringOthers rings every flusher's doorbell but this Store's own in the
// background, on a goroutine Close waits for (none after Close).
func (s *Store) ringOthers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.rings.Add(1)
	own := s.bell
	go func() {
		defer s.rings.Done()
		s.ring(own)
	}()
}

// ring wakes every flusher listening on this palace but the one at own
// (best effort: a lost ring only delays a flush until the next enqueue, a
// retry or a restart).
func (s *Store) ring(own string) {
	dir := filepath.Join(filepath.Dir(s.path), doorbellDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	// Best effort: a directory that cannot be opened rings no one.
	_ = atSocketDir(dir, func(addr func(name string) string) error {
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".sock") || filepath.Join(dir, e.Name()) == own {
				continue
			}
			c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr(e.Name()), Net: "unixgram"})
			if errors.Is(err, syscall.ECONNREFUSED) {
				os.Remove(filepath.Join(dir, e.Name())) // its flusher is gone
			} else if err == nil {
				c.Write([]byte{1}) // best effort, as every ring
				c.Close()          // a datagram socket: nothing buffered to lose
			}
		}
		return nil
	})
}
