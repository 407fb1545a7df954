//go:build unix

package main

import (
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// pauseAt is the coordinator's pause hook (coordinator.Config.PauseAt) when
// pauseVariable names a point, else nil: the daemon stops there, once, and
// says so in its log, so the test can stop the whole process (SIGSTOP) at
// that point deterministically; the continue (SIGCONT) lets it go on.
func pauseAt(log *slog.Logger) func(point string) {
	want := os.Getenv(pauseVariable)
	if want == "" {
		return nil
	}
	var once sync.Once
	return func(point string) {
		if point != want {
			return
		}
		once.Do(func() {
			cont := make(chan os.Signal, 1)
			signal.Notify(cont, syscall.SIGCONT) // before the log line: a continue right after it is not missed
			defer signal.Stop(cont)
			log.Warn("paused at a test's pause point until continued (SIGCONT)", "point", point, "variable", pauseVariable)
			<-cont
		})
	}
}
