package testutil

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user and system) this process used so far:
// benchmarks report CPU per operation beside ns/op, which other work on a
// shared machine stretches.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
