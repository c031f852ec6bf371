// Command floorrelay is the least a stdio-to-HTTP MCP proxy can do: each
// line read from stdin is POSTed to FLOOR_URL (bearer from FLOOR_TOKEN,
// the session id echoed back) and the answer's JSON written to stdout. No
// routing, no merging, no local side: edgebench runs it beside the edge to
// show what one extra process hop costs on this machine.
package main

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/tidwall/gjson"
)

func main() {
	url, token := os.Getenv("FLOOR_URL"), os.Getenv("FLOOR_TOKEN")
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	out := bufio.NewWriter(os.Stdout)
	var session, version string
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(line))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
			session = s
		}
		if v := gjson.GetBytes(body, "result.protocolVersion"); v.Exists() {
			version = v.String()
		}
		for _, l := range bytes.Split(body, []byte("\n")) {
			l = bytes.TrimPrefix(bytes.TrimSpace(l), []byte("data:"))
			if len(l) > 0 && l[0] == ' ' {
				l = l[1:]
			}
			if len(l) > 0 && l[0] == '{' {
				out.Write(l)
				out.WriteByte('\n')
			}
		}
		out.Flush()
	}
}
