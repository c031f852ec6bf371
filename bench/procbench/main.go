// Command procbench times whole commands side by side: it alternates them
// run by run (so a noisy machine slows both alike) and prints the median,
// p90 and the ratio of each command to the first.
//
//	go run ./bench/procbench -n 300 -- 'cmd one' 'cmd two' ...
//
// Each command runs through sh -c with stdout and stderr discarded; a
// failing run aborts the benchmark. With -exec a command is split on spaces
// and started directly, so the shell's own start is not in the figure.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 200, "runs of each command")
	warm := flag.Int("warmup", 5, "untimed runs of each command first")
	direct := flag.Bool("exec", false, "start each command directly (split on spaces), not through sh -c")
	flag.Parse()
	cmds := flag.Args()
	if len(cmds) == 0 {
		fmt.Fprintln(os.Stderr, "usage: procbench [-n N] -- 'cmd' ['cmd'...]")
		os.Exit(2)
	}
	times := make([][]time.Duration, len(cmds))
	for i := 0; i < *warm+*n; i++ {
		for j, c := range cmds {
			start := time.Now()
			cmd := exec.Command("sh", "-c", c)
			if *direct {
				argv := strings.Fields(c)
				cmd = exec.Command(argv[0], argv[1:]...)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n%s", c, err, out)
				os.Exit(1)
			}
			if i >= *warm {
				times[j] = append(times[j], time.Since(start))
			}
		}
	}
	base := median(times[0])
	fmt.Printf("%-10s %-10s %-8s %s\n", "median", "p90", "ratio", "command")
	for j, c := range cmds {
		m := median(times[j])
		fmt.Printf("%-10s %-10s %-8.2f %s\n", ms(m), ms(pct(times[j], 0.9)), float64(m)/float64(base), c)
	}
}

func median(d []time.Duration) time.Duration { return pct(d, 0.5) }

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }
