package main

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/warmconn"
)

// relayEnv, set to "<listen address> <upstream URL>", makes this program
// the relay: a second process that forwards each POST to serve over the
// transport the gateway uses (warmconn) and does nothing else. What it
// adds is the floor under the gateway's cost on this machine: one more
// process and one more HTTP exchange. It runs on one processor, as the
// gateway does.
const relayEnv = "GATEWAYCOST_RELAY"

func startRelay(upstream string) *proc {
	self, err := os.Executable()
	if err != nil {
		log.Panic(err)
	}
	addr := freeAddr()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), relayEnv+"="+addr+" "+upstream, "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	return startProc("relay", cmd, addr, func() string { return "(its stderr is above)" })
}

func runRelay(spec string) {
	addr, upstream, _ := strings.Cut(spec, " ")
	warm, err := warmconn.New(upstream, http.DefaultTransport)
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Timeout: time.Minute, Transport: warm}
	log.Fatal(http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
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
