package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// groupCPU is the CPU time (user + system) the live processes of process
// group pgid have used so far, from /proc (0 where /proc cannot be read).
func groupCPU(pgid int) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total time.Duration
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the process ended between the glob and the read
		}
		// Fields after the command (in parentheses, which may hold spaces):
		// state(3) ppid(4) pgrp(5) ... utime(14) stime(15).
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		u, _ := strconv.ParseInt(fields[11], 10, 64)
		k, _ := strconv.ParseInt(fields[12], 10, 64)
		total += time.Duration(u+k) * clockTick
	}
	return total
}

// selfCPU is this process's CPU time so far (the plain client, and the
// embedding server every palace here uses).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
