//go:build frametrace

package frametrace

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// On is true in a build with the tag; stamps are written only when
// FRAMETRACE_DIR names a directory.
const On = true

type stamp struct {
	at       int64
	stage    string
	conv     string
	from, to int64
}

var rec = struct {
	sync.Mutex
	dir     string
	pending []stamp
	once    sync.Once
}{dir: os.Getenv("FRAMETRACE_DIR")}

// Stamp records that the frames from..to of a conversation reached stage,
// at the time of the call.
func Stamp(stage, conversationID string, from, to int64) {
	StampAt(time.Now(), stage, conversationID, from, to)
}

// StampAt is Stamp at a time the caller took.
func StampAt(t time.Time, stage, conversationID string, from, to int64) {
	if rec.dir == "" {
		return
	}
	at := t.UnixNano()
	rec.once.Do(func() { go writeLoop() })
	rec.Lock()
	rec.pending = append(rec.pending, stamp{at, stage, conversationID, from, to})
	rec.Unlock()
}

// writeLoop appends the stamps to the process's file every 100 ms, off
// the stamping goroutines' path.
func writeLoop() {
	f, err := os.OpenFile(filepath.Join(rec.dir, fmt.Sprintf("%d.trace", os.Getpid())), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "frametrace:", err)
		return
	}
	w := bufio.NewWriter(f)
	var batch []stamp
	for range time.Tick(100 * time.Millisecond) {
		rec.Lock()
		batch, rec.pending = rec.pending, batch[:0]
		rec.Unlock()
		for _, s := range batch {
			fmt.Fprintf(w, "%d %s %s %d %d %d\n", s.at, s.stage, s.conv, s.from, s.to, os.Getpid())
		}
		w.Flush()
	}
}
