package main

import (
	"strings"
	"testing"
	"time"
)

// TestLoggerWritesDurationsAsSeconds: both formats write a duration as
// seconds (a float), never Go's raw nanoseconds (JSON) or a duration
// string (text).
func TestLoggerWritesDurationsAsSeconds(t *testing.T) {
	t.Parallel()
	for format, want := range map[string]string{"json": `"duration":1.5,"wait":0.00025`, "text": "duration=1.5 wait=0.00025"} {
		var b strings.Builder
		log, err := newLogger(&b, format, "info")
		if err != nil {
			t.Fatal(err)
		}
		log.Info("x", "duration", 1500*time.Millisecond, "wait", 250*time.Microsecond)
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s: %q lacks %s", format, b.String(), want)
		}
	}
}
