package gateway

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// A request that names no device (no token, or a wrong, revoked or
// expired one; /healthz; a 404 or 405 without a token) is counted
// against its source: the client's address, an IPv6 one by its /64.
// Each source has sourceRate a second (sourceBurst at once) with a line
// each; beyond that it is answered 429 with no line of its own, and one
// line a minute per source counts those (attack69 F2: 4,300 401s a
// second from one client wrote 1.4 MB/s of audit log, and a full disk
// refuses every device's writes). At most maxSources sources are counted
// apart; beyond them, a new source shares one bucket with every other
// until a sweep drops the idle ones.
const (
	sourceRate   = 20
	sourceBurst  = 100
	maxSources   = 1024
	sourceSweep  = time.Minute
	otherSources = "other sources"
)

// ruleRateSource is the line that counts a source's requests refused
// with no line of their own.
const ruleRateSource Rule = "rate:source"

// sources holds the buckets of requests that name no device.
type sources struct {
	mu    sync.Mutex
	m     map[string]*source
	swept time.Time
}

type source struct {
	lim     *rate.Limiter
	refused int       // requests refused with no line since first
	first   time.Time // the first of them
}

// take takes one token from addr's bucket at now (none when named: the
// request names a device, whose own rates apply). It reports whether the
// request goes on, and the lines due (sweep): a sweep runs at most once
// a minute.
func (ss *sources) take(addr string, now time.Time, named bool) (bool, []Entry) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var due []Entry
	if now.Sub(ss.swept) >= sourceSweep {
		due = ss.sweepLocked(now)
	}
	if named {
		return true, due
	}
	key := sourceKey(addr)
	src := ss.m[key]
	if src == nil && len(ss.m) >= maxSources {
		key, src = otherSources, ss.m[otherSources]
	}
	if src == nil {
		if ss.m == nil {
			ss.m = map[string]*source{}
		}
		src = &source{lim: rate.NewLimiter(sourceRate, sourceBurst)}
		ss.m[key] = src
	}
	if src.lim.AllowN(now, 1) {
		return true, due
	}
	if src.refused == 0 {
		src.first = now
	}
	src.refused++
	return false, due
}

// sweep is the line of each source with requests refused since its last
// one; it drops the sources whose buckets are full (a new one is the
// same).
func (ss *sources) sweep(now time.Time) []Entry {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.sweepLocked(now)
}

func (ss *sources) sweepLocked(now time.Time) []Entry {
	ss.swept = now
	var due []Entry
	for key, src := range ss.m {
		if src.refused > 0 {
			due = append(due, Entry{Time: now.UTC(), Decision: VerdictLimited, Rule: ruleRateSource, Status: 429,
				Note: fmt.Sprintf("%d requests naming no device from %s refused with no line of their own since %s", src.refused, key, src.first.UTC().Format(time.RFC3339))})
			src.refused = 0
		}
		if src.lim.TokensAt(now) >= sourceBurst {
			delete(ss.m, key)
		}
	}
	return due
}

// sourceKey is the source of a request from addr (its RemoteAddr): the
// IP, an IPv6 one's /64.
func sourceKey(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if ip = ip.Unmap(); ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}
