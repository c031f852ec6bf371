package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// relayEnv, set to "<listen address> <upstream URL>", makes this program
// the relay: a second process that forwards each POST to serve with the
// same net/http client the gateway uses and does nothing else. What it
// adds is the floor under the gateway's cost: one more process and one
// more HTTP hop on this machine.
const relayEnv = "GATEWAYCOST_RELAY"

type relayProc struct {
	*exec.Cmd
	url string
}

func startRelay(upstream, mode string) *relayProc {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), relayEnv+"="+addr+" "+upstream+" "+mode)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return &relayProc{Cmd: cmd, url: "http://" + addr + "/mcp"}
		}
		time.Sleep(20 * time.Millisecond)
	}
	log.Fatal("the relay did not listen")
	return nil
}

func runRelay(spec string) {
	addr, rest, _ := strings.Cut(spec, " ")
	upstream, mode, _ := strings.Cut(rest, " ")
	client := &http.Client{Timeout: time.Minute}
	u, _ := url.Parse(upstream)
	spare := make(chan net.Conn, 1)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			log.Fatal(err)
		}
		return c
	}
	if mode == "predial" {
		spare <- dial()
	}
	log.Fatal(http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if mode != "" {
			var c net.Conn
			if mode == "predial" {
				c = <-spare
				go func() { spare <- dial() }()
			} else {
				c = dial()
			}
			defer c.Close()
			req := &http.Request{Method: "POST", URL: u, Host: u.Host, Header: http.Header{"Content-Type": {"application/json"}, "Authorization": {r.Header.Get("Authorization")}}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Close: true}
			bw := bufio.NewWriter(c)
			req.Write(bw)
			bw.Flush()
			resp, err := http.ReadResponse(bufio.NewReader(c), req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(resp.StatusCode)
			w.Write(b)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, upstream, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		w.Write(b)
	})))
}
