// Command hopfloor measures what one more process on the path costs on
// this machine, whatever that process does: a client sends a 1 KB request
// to a second process and reads a 14 KB answer (the size of a real
// list_drawers page) over a kept-alive loopback connection, three ways
// alternated call by call, with a millisecond idle between calls as
// between an agent's calls. "net/http server" is what the gateway and
// bench/gatewaycost's relay answer with; "bare HTTP reader" reads each
// request with http.ReadRequest and writes the answer in one write, the
// least an HTTP server can do; "bare TCP" is the exchange without HTTP.
// The gateway's added latency can be no lower than the first.
//
//	go run ./bench/hopfloor -n 3000
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"
)

const (
	serverEnv  = "HOPFLOOR_SERVER"
	answerSize = 14_000
	askSize    = 1_000
)

var n = flag.Int("n", 2000, "calls each way")

func main() {
	if addrs := os.Getenv(serverEnv); addrs != "" {
		serve(addrs)
		return
	}
	flag.Parse()
	addrs := []string{freeAddr(), freeAddr(), freeAddr()}
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	srv := exec.Command(self)
	srv.Env = append(os.Environ(), serverEnv+"="+addrs[0]+" "+addrs[1]+" "+addrs[2])
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer srv.Process.Kill()
	names := []string{"net/http server", "bare HTTP reader", "bare TCP"}
	calls := []func(){httpCall(addrs[0]), httpCall(addrs[1]), tcpCall(addrs[2])}
	took := make([][]time.Duration, len(calls))
	for range *n {
		for i, call := range calls {
			t := time.Now()
			call()
			took[i] = append(took[i], time.Since(t))
			time.Sleep(time.Millisecond)
		}
	}
	fmt.Printf("a %d-byte request and a %d-byte answer to a second process, %d calls each way, alternated:\n\n| server | median | p90 |\n| --- | --- | --- |\n", askSize, answerSize, *n)
	for i, x := range took {
		slices.Sort(x)
		fmt.Printf("| %s | %.3f ms | %.3f ms |\n", names[i], ms(x[len(x)/2]), ms(x[len(x)*9/10]))
	}
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// dial connects to addr, waiting (five seconds at most) for it to listen.
func dial(addr string) net.Conn {
	for range 250 {
		if c, err := net.Dial("tcp", addr); err == nil {
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
	log.Fatalf("nothing listens on %s", addr)
	return nil
}

// httpCall is one POST on a kept-alive connection, written and read on
// the calling goroutine (as the edge's transport, warmconn, does).
func httpCall(addr string) func() {
	c := dial(addr)
	br := bufio.NewReader(c)
	req := append([]byte("POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(askSize)+"\r\n\r\n"), bytes.Repeat([]byte("q"), askSize)...)
	return func() {
		if _, err := c.Write(req); err != nil {
			log.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			log.Fatal(err)
		}
		if b, err := io.ReadAll(resp.Body); err != nil || len(b) != answerSize {
			log.Fatalf("answer of %d bytes: %v", len(b), err)
		}
	}
}

func tcpCall(addr string) func() {
	c := dial(addr)
	req, answer := bytes.Repeat([]byte("q"), askSize), make([]byte, answerSize)
	return func() {
		if _, err := c.Write(req); err != nil {
			log.Fatal(err)
		}
		if _, err := io.ReadFull(c, answer); err != nil {
			log.Fatal(err)
		}
	}
}

// serve is the second process: the three servers on their addresses.
func serve(spec string) {
	var a [3]string
	if _, err := fmt.Sscan(spec, &a[0], &a[1], &a[2]); err != nil {
		log.Fatal(err)
	}
	answer := bytes.Repeat([]byte("a"), answerSize)
	go accept(a[1], func(c net.Conn) {
		whole := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(answerSize)+"\r\n\r\n"), answer...)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if _, err := c.Write(whole); err != nil {
				return
			}
		}
	})
	go accept(a[2], func(c net.Conn) {
		req := make([]byte, askSize)
		for {
			if _, err := io.ReadFull(c, req); err != nil {
				return
			}
			if _, err := c.Write(answer); err != nil {
				return
			}
		}
	})
	log.Fatal(http.ListenAndServe(a[0], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(answerSize))
		w.Write(answer)
	})))
}

func accept(addr string, each func(net.Conn)) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() { defer c.Close(); each(c) }()
	}
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
