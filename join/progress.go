package join

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress reports a long phase on stderr: one redrawn line on a
// terminal (done/total, rate, ETA), a plain line every few seconds
// otherwise. A nil *Progress reports nothing.
type Progress struct {
	W        io.Writer
	Terminal bool
	// Every is the interval of plain lines (default 5 s; a terminal
	// redraws every 200 ms).
	Every time.Duration

	mu    sync.Mutex
	phase string
	done  int
	total int // 0: unknown
	start time.Time
	last  time.Time
	drawn bool
}

// Phase starts a phase with a known total (0: unknown).
func (p *Progress) Phase(name string, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
	now := time.Now()
	p.phase, p.done, p.total, p.start, p.last, p.drawn = name, 0, total, now, now, false
}

// Set records how much of the phase is done and draws when due.
func (p *Progress) Set(done int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	every := p.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	if p.Terminal {
		every = 200 * time.Millisecond
	}
	if time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	p.drawLocked()
}

func (p *Progress) line() string {
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(p.done) / el
	}
	if p.total <= 0 {
		return fmt.Sprintf("join: %s: %d records, %.0f/s", p.phase, p.done, rate)
	}
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(p.total-p.done)/rate) * time.Second).Round(time.Second).String()
	}
	return fmt.Sprintf("join: %s: %d/%d records, %.0f/s, ETA %s", p.phase, p.done, p.total, rate, eta)
}

func (p *Progress) drawLocked() {
	p.drawn = true
	if p.Terminal {
		fmt.Fprintf(p.W, "\r\x1b[K%s", p.line()) // progress on stderr: a lost line is not worth failing the join
		return
	}
	fmt.Fprintln(p.W, p.line()) // as above
}

// endLocked finishes a phase that drew anything: the redrawn line ends,
// a log gets the phase's last count (a short phase stays silent).
func (p *Progress) endLocked() {
	if !p.drawn || p.phase == "" {
		return
	}
	if p.Terminal {
		fmt.Fprintf(p.W, "\r\x1b[K%s\n", p.line()) // as above
	} else {
		fmt.Fprintln(p.W, p.line()) // as above
	}
	p.drawn = false
}

// Done ends the current phase.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
}
