package ledger

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTwoOSProcessesOneFile runs two gateway processes (this test binary,
// re-executed) on one ledger file, each sending the same op id from 20
// goroutines at once: the upstream (a file each forward appends a line
// to) sees one write, and all 40 callers get its answer.
func TestTwoOSProcessesOneFile(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "upstream-calls")
	op := opID("two processes")
	outs := make([]bytes.Buffer, 2)
	var wg sync.WaitGroup
	for i := range outs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLedgerChildProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "LEDGER_CHILD=1", "LEDGER_PATH="+filepath.Join(dir, FileName), "LEDGER_CALLS="+calls, "LEDGER_OP="+op)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("child %d: %v\n%s", i, err, outs[i].String())
			}
		})
	}
	wg.Wait()
	b, _ := os.ReadFile(calls)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Fatalf("two processes forwarded the op %d times:\n%s", n, b)
	}
	answers := map[string]int{}
	for _, o := range outs {
		for _, line := range strings.Split(o.String(), "\n") {
			if a, ok := strings.CutPrefix(strings.TrimSpace(line), "answer "); ok {
				answers[a]++
			}
		}
	}
	if len(answers) != 1 {
		t.Fatalf("callers got different answers: %v", answers)
	}
	for a, n := range answers {
		if n != 40 || !strings.Contains(a, strings.TrimSpace(string(b))) {
			t.Fatalf("%d callers got %s; the upstream wrote %s", n, a, b)
		}
	}
}

// TestLedgerChildProcess is one of TestTwoOSProcessesOneFile's gateways.
func TestLedgerChildProcess(t *testing.T) {
	if os.Getenv("LEDGER_CHILD") != "1" {
		t.Skip("run by TestTwoOSProcessesOneFile")
	}
	l, err := Open(os.Getenv("LEDGER_PATH"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	forward := func(context.Context) (Answer, error) {
		me := fmt.Sprintf("pid-%d", os.Getpid())
		f, err := os.OpenFile(os.Getenv("LEDGER_CALLS"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return Answer{}, err
		}
		fmt.Fprintln(f, me)
		f.Close()
		time.Sleep(100 * time.Millisecond) // the other process's copies arrive meanwhile
		return Answer{Status: 200, Body: fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"success\": true, \"by\": \"%s\"}"}]}}`, me)}, nil
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			a, _, err := doUntilAnswered(l, call("laptop", os.Getenv("LEDGER_OP"), fmt.Sprint(i)), forward)
			if err != nil {
				t.Error(err)
				return
			}
			fmt.Printf("answer %s\n", result(a.Body))
		})
	}
	wg.Wait()
}
