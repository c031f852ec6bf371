//go:build !unix

package ledger

import "time"

// cpuTime is not measured here: benchmarks report 0 CPU.
func cpuTime() time.Duration { return 0 }
