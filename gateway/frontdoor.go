package gateway

import (
	"net"
	"net/url"
	"strings"
)

// The front door, as mempalace serve's (mempalace-surface §6.3): the Host
// pin of a loopback bind, and no Origin but a loopback one.

var loopback = map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true}

func hostAllowed(bind, host string) bool {
	if !loopback[strings.Trim(bind, "[]")] {
		return true
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	return loopback[strings.Trim(h, "[]")] || h == bind
}

func originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && loopback[u.Hostname()]
}
