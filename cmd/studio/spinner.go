package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/studio/operator/internal/protocol"
)

// Turn states the send status line shows, derived from the frames the
// stream carries and from its status comments, which say what no frame
// does: the place in the queue, a model call being retried (progressWords).
const (
	turnQueued  = "queued"
	turnWorking = "working"
	turnWaiting = "waiting for your confirmation"
)

// turnStateOf is what a frame says the turn is doing.
func turnStateOf(f protocol.Frame) string {
	switch p := f.Payload.(type) {
	case protocol.TextPayload:
		if p.Role == protocol.RoleUser {
			return turnQueued
		}
	case protocol.ToolCallPayload:
		return "calling " + p.Tool
	case protocol.ProposalPayload:
		return turnWaiting
	case protocol.ConfirmationPayload:
		switch p.State {
		case protocol.ConfirmationRequired:
			return turnWaiting
		case protocol.ConfirmationConfirmed:
			return "executing the confirmed command"
		}
	case protocol.DonePayload:
		return ""
	}
	return turnWorking
}

// progressWords is what the server says the turn is doing (the stream's
// status comment), for the status line.
func progressWords(p *protocol.TurnProgress) string {
	switch p.State {
	case protocol.ProgressQueued:
		if p.QueuePosition > 0 {
			return fmt.Sprintf("queued: number %d in line for the model", p.QueuePosition)
		}
		return turnQueued
	case protocol.ProgressRetrying:
		why := fmt.Sprintf("the model failed (%s)", p.ErrorCode)
		if p.ErrorCode == protocol.RateLimited {
			why = "the model is rate limited"
		}
		return fmt.Sprintf("%s; attempt %d at %s", why, p.Attempt, protocol.Time(p.RetryAt).Local().Format("15:04:05"))
	case protocol.ProgressAwaitingConfirmation:
		return turnWaiting
	case protocol.ProgressExecuting:
		return "executing the confirmed command"
	case protocol.ProgressDatabaseUnavailable:
		return fmt.Sprintf("the database is unavailable; attempt %d at %s", p.Attempt, protocol.Time(p.RetryAt).Local().Format("15:04:05"))
	}
	return turnWorking
}

// spinner is the status line of send on a terminal: a spinner, the turn's
// state and the time it has been in it, on stderr. Output printed through
// print clears the line first; the line is drawn only when the output is
// at the start of a line, so streamed text is never overwritten. Off a
// terminal it draws nothing.
type spinner struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	text string
	// since is when the state began.
	since  time.Time
	drawn  bool
	midRow bool // the last output did not end a line
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func newSpinner(w io.Writer) *spinner {
	s := &spinner{w: w, quit: make(chan struct{}), done: make(chan struct{})}
	if f, ok := w.(*os.File); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		s.tty = true
		go s.loop()
	} else {
		close(s.done)
	}
	return s
}

func (s *spinner) loop() {
	defer close(s.done)
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	t := time.NewTicker(120 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.text != "" && !s.midRow {
			fmt.Fprintf(s.w, "\r\033[K%s %s (%s)", frames[i%len(frames)], s.text, time.Since(s.since).Truncate(time.Second))
			s.drawn = true
		}
		s.mu.Unlock()
	}
}

// set changes the state shown; "" hides the line.
func (s *spinner) set(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state != s.text {
		s.text, s.since = state, time.Now()
	}
}

// print runs fn, which writes to out (see output), with the line cleared.
func (s *spinner) print(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
	fn()
}

// output wraps the writer the turn's frames go to, so the status line
// knows whether that output stopped mid-line.
func (s *spinner) output(w io.Writer) io.Writer { return lineTracker{w: w, s: s} }

// lineTracker remembers whether the last write ended a line. Writes happen
// inside print, with the spinner's lock held.
type lineTracker struct {
	w io.Writer
	s *spinner
}

func (t lineTracker) Write(b []byte) (int, error) {
	if len(b) > 0 {
		t.s.midRow = b[len(b)-1] != '\n'
	}
	return t.w.Write(b)
}

func (s *spinner) clear() {
	if s.drawn {
		fmt.Fprint(s.w, "\r\033[K")
		s.drawn = false
	}
}

// reconnecting reports a dropped stream.
func (s *spinner) reconnecting(err error, wait time.Duration) {
	s.print(func() {
		fmt.Fprintf(s.w, "stream interrupted (%v); reconnecting from the cursor in %s\n", err, wait)
	})
}

// stop removes the line and ends the spinner.
func (s *spinner) stop() {
	s.once.Do(func() {
		close(s.quit)
		<-s.done
		s.mu.Lock()
		s.clear()
		s.mu.Unlock()
	})
}
