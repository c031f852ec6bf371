package render

import (
	"bytes"
	"io/fs"
)

// readLog is a System that remembers what a plan read, so that the plan
// made before the lock can be reused under the lock when nothing it read
// has changed (planning a large config twice would double its cost).
// Writes pass through unrecorded; plans do not write.
type readLog struct {
	System
	reads []readRecord
}

// readRecord is one read and what it saw.
type readRecord struct {
	op, name string
	data     []byte      // ReadFile
	target   string      // EvalSymlinks
	mode     fs.FileMode // Lstat
	err      string
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (l *readLog) ReadFile(name string) ([]byte, error) {
	b, err := l.System.ReadFile(name)
	l.reads = append(l.reads, readRecord{op: "read", name: name, data: b, err: errText(err)})
	return b, err
}

func (l *readLog) Lstat(name string) (fs.FileInfo, error) {
	fi, err := l.System.Lstat(name)
	r := readRecord{op: "lstat", name: name, err: errText(err)}
	if err == nil {
		r.mode = fi.Mode()
	}
	l.reads = append(l.reads, r)
	return fi, err
}

func (l *readLog) EvalSymlinks(name string) (string, error) {
	t, err := l.System.EvalSymlinks(name)
	l.reads = append(l.reads, readRecord{op: "eval", name: name, target: t, err: errText(err)})
	return t, err
}

// unchanged reports whether every recorded read gives the same answer now.
func (l *readLog) unchanged() bool {
	for _, r := range l.reads {
		switch r.op {
		case "read":
			b, err := l.System.ReadFile(r.name)
			if errText(err) != r.err || !bytes.Equal(b, r.data) || (b == nil) != (r.data == nil) {
				return false
			}
		case "lstat":
			fi, err := l.System.Lstat(r.name)
			if errText(err) != r.err || (err == nil && fi.Mode() != r.mode) {
				return false
			}
		case "eval":
			t, err := l.System.EvalSymlinks(r.name)
			if errText(err) != r.err || t != r.target {
				return false
			}
		}
	}
	return true
}
