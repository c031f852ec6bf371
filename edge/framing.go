package edge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
)

// MaxMessage is the largest agent message accepted (MemPalace's 16 MiB).
const MaxMessage = 16 << 20

// syncWriter makes each Write atomic, so the guard's error replies never
// interleave with the SDK's messages (which it writes one per Write).
type syncWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) Close() error { return s.w.Close() }

// guardInput stands between the agent and the SDK, whose stdio session
// ends on the first line that is not JSON. Each line is checked: not JSON
// gets -32700, a batch or non-object -32600, a line over MaxMessage
// -32600 "Request too large" (its bytes are skipped, not buffered); only
// well-formed objects reach the SDK. A bad message never ends the session.
func guardInput(in io.Reader, out io.Writer, log *slog.Logger) io.ReadCloser {
	pr, pw := io.Pipe()
	reply := func(code int, msg string) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
		out.Write(append(b, '\n'))
	}
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, tooLong, err := readLine(br, MaxMessage)
			switch t := bytes.TrimSpace(line); {
			case tooLong:
				log.Warn("agent message over 16 MiB refused")
				reply(-32600, "Request too large")
			case len(t) == 0:
			case !json.Valid(t):
				log.Warn("agent sent a line that is not JSON; answered with a parse error")
				reply(-32700, "Parse error")
			case t[0] != '{':
				reply(-32600, "Invalid Request")
			default:
				if _, werr := pw.Write(append(t, '\n')); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(ignoreEOF(err))
				return
			}
		}
	}()
	return pr
}

// readLine reads one newline-terminated line of at most max bytes; a longer
// line is consumed and dropped (tooLong).
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, err := br.ReadLine()
		if !tooLong {
			if len(line)+len(chunk) > max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err != nil || !isPrefix {
			return line, tooLong, err
		}
	}
}

func ignoreEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
