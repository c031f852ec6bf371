package gateway

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Repeated refusals are summarised: past its first few, a refusal has no
// audit line of its own, and one line a minute per source or device
// counts them (a full disk refuses every device's writes).
//
// A request that names no device (no token, or a wrong, revoked or
// expired one; /healthz; a 404 or 405 without a token) is counted
// against its source: the client's address, an IPv6 one by its /64.
// Each source has sourceRate a second (sourceBurst at once) with a line
// each; beyond that it is answered 429 with no line of its own, counted
// in its source's line (rule rate:source; attack69 F2: 4,300 401s a
// second from one client wrote 1.4 MB/s of audit log). At most
// maxSources sources are counted apart; beyond them, a new source shares
// one bucket with every other until a sweep drops the idle ones.
//
// A device's refusals by its own bounds (rate:read, rate:write, its
// requests in flight: in_flight, its share of streams: stream:share)
// have a line each, deviceLines of them between two sweeps; past those
// they are counted in the device's line (rule rate:device; attack72 F5:
// a device over its read rate wrote 3,400 lines a second).
const (
	sourceRate   = 20
	sourceBurst  = 100
	maxSources   = 1024
	deviceLines  = 10
	sweepEvery   = time.Minute
	otherSources = "other sources"
)

// The lines that count refusals with no line of their own: a source's,
// a device's.
const (
	ruleRateSource Rule = "rate:source"
	ruleRateDevice Rule = "rate:device"
)

// refusals holds the buckets of requests that name no device, and counts
// the refusals with no line of their own.
type refusals struct {
	mu      sync.Mutex
	sources map[string]*rate.Limiter
	counted map[refuser]*tally
	swept   time.Time
}

// refuser is whose refusals a tally counts: a device, or else a source.
type refuser struct{ device, source string }

// tally is one refuser's refusals since the last sweep.
type tally struct {
	lined int          // a device's refusals with a line of their own
	n     map[Rule]int // refusals with none, by rule
	first time.Time    // the first of those
}

// take takes one token from addr's bucket at now (none when named: the
// request names a device, whose own rates apply). It reports whether the
// request goes on, and the lines due (sweep): a sweep runs at most once
// a minute.
func (rs *refusals) take(addr string, now time.Time, named bool) (bool, []Entry) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var due []Entry
	if now.Sub(rs.swept) >= sweepEvery {
		due = rs.sweepLocked(now)
	}
	if named {
		return true, due
	}
	key := sourceKey(addr)
	lim := rs.sources[key]
	if lim == nil && len(rs.sources) >= maxSources {
		key, lim = otherSources, rs.sources[otherSources]
	}
	if lim == nil {
		if rs.sources == nil {
			rs.sources = map[string]*rate.Limiter{}
		}
		lim = rate.NewLimiter(sourceRate, sourceBurst)
		rs.sources[key] = lim
	}
	if lim.AllowN(now, 1) {
		return true, due
	}
	rs.countLocked(refuser{source: key}, ruleRateSource, now)
	return false, due
}

// lined reports whether a device's refusal by rule at now has a line of
// its own: its first deviceLines since the last sweep do; past them it
// is counted in the device's next line.
func (rs *refusals) lined(device string, rule Rule, now time.Time) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	who := refuser{device: device}
	if t := rs.counted[who]; t != nil && t.lined >= deviceLines {
		rs.countLocked(who, rule, now)
		return false
	}
	rs.countLocked(who, "", now)
	return true
}

// countLocked counts a refusal of who's by rule ("": one with a line).
func (rs *refusals) countLocked(who refuser, rule Rule, now time.Time) {
	if rs.counted == nil {
		rs.counted = map[refuser]*tally{}
	}
	t := rs.counted[who]
	if t == nil {
		t = &tally{n: map[Rule]int{}}
		rs.counted[who] = t
	}
	if rule == "" {
		t.lined++
		return
	}
	if len(t.n) == 0 {
		t.first = now
	}
	t.n[rule]++
}

// sweep is the line of each source and device with refusals counted
// since the last one; it drops the sources whose buckets are full (a new
// one is the same).
func (rs *refusals) sweep(now time.Time) []Entry {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.sweepLocked(now)
}

func (rs *refusals) sweepLocked(now time.Time) []Entry {
	rs.swept = now
	var due []Entry
	for who, t := range rs.counted {
		if len(t.n) > 0 {
			due = append(due, t.line(who, now))
		}
	}
	rs.counted = nil
	for key, lim := range rs.sources {
		if lim.TokensAt(now) >= sourceBurst {
			delete(rs.sources, key)
		}
	}
	return due
}

// line is the line that counts t's refusals with no line of their own
// (a device's with no status: its refusals of a tools/call were HTTP 200s).
func (t *tally) line(who refuser, now time.Time) Entry {
	total, by := 0, []string{}
	for _, rule := range slices.Sorted(maps.Keys(t.n)) {
		total += t.n[rule]
		by = append(by, fmt.Sprintf("%d by %s", t.n[rule], rule))
	}
	since := t.first.UTC().Format(time.RFC3339)
	if who.device != "" {
		return Entry{Time: now.UTC(), Device: who.device, Decision: VerdictLimited, Rule: ruleRateDevice,
			Note: fmt.Sprintf("%d requests of %s refused with no line of their own since %s (%s)", total, who.device, since, strings.Join(by, ", "))}
	}
	return Entry{Time: now.UTC(), Decision: VerdictLimited, Rule: ruleRateSource, Status: 429,
		Note: fmt.Sprintf("%d requests naming no device from %s refused with no line of their own since %s", total, who.source, since)}
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
