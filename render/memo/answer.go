package memo

import "os"

// Answer answers a start from its memo: if argv (os.Args) is a command the
// memo may answer and the memo there still holds, it writes the recorded
// stderr and returns the recorded exit status and true. Otherwise it
// returns false and the start runs in full.
func Answer(argv []string, getenv func(string) (string, bool), stderr *os.File) (int, bool) {
	if len(argv) < 2 {
		return 0, false
	}
	args := argv[1:]
	home, ok := Command(args)
	if !ok {
		return 0, false
	}
	path, _, ok := Path(home, getenv)
	if !ok {
		return 0, false
	}
	m := Load(path)
	if !m.Check(args, getenv) {
		return 0, false
	}
	stderr.WriteString(m.Stderr)
	return m.Exit, true
}
