package studio

import (
	"context"
	"strings"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// A running run's output is saved as it grows, so the run detail shows it
// live: the first text at once, then at most every OutputFlushInterval or
// as soon as OutputFlushBytes more arrived, bounded by MaxOutputBytes like
// the final output. The final output is still written by FinishRun.

// Defaults of the partial-output settings.
const (
	DefaultOutputFlushInterval = 500 * time.Millisecond
	DefaultOutputFlushBytes    = 4 << 10
)

// outputSaver writes one run's partial output.
type outputSaver struct {
	s     *Service
	runID string
	saved int       // bytes of output saved so far
	at    time.Time // when they were (monotonic: a rate, not a timestamp)
	off   bool      // stop saving: the run ended elsewhere, or the store refused
}

// add is called with the whole output so far after each text event.
func (o *outputSaver) add(ctx context.Context, out string) {
	if o.off || len(out) == o.saved {
		return
	}
	if o.saved > 0 && len(out)-o.saved < o.s.cfg.OutputFlushBytes && time.Since(o.at) < o.s.cfg.OutputFlushInterval {
		return
	}
	if o.saved >= o.s.cfg.MaxOutputBytes {
		return // already cut at the bound: the end writes the final form
	}
	text, cut := truncateOutput(out, o.s.cfg.MaxOutputBytes)
	err := o.s.store.SaveRunOutput(ctx, store.SaveRunOutputParams{ID: o.runID, Output: text, Truncated: cut, Now: o.s.now()})
	if err != nil {
		// Partial output is a courtesy: the run goes on and its end
		// writes the whole output. A run no longer running stops saving.
		o.off = true
		if !protocol.IsCode(err, protocol.Conflict) && ctx.Err() == nil {
			o.s.log.Warn("save partial run output", "run", o.runID, "err", err)
		}
		return
	}
	o.saved, o.at = len(out), time.Now()
	o.s.runChanged(o.runID)
}

// completeStreaming is model.Complete that saves the output as it grows.
func (s *Service) completeStreaming(ctx context.Context, runID string, req model.Request) (string, error) {
	var b strings.Builder
	saver := outputSaver{s: s, runID: runID}
	for ev, err := range s.provider.Stream(ctx, req) {
		if err != nil {
			return b.String(), err
		}
		if ev.Kind == model.EventText {
			b.WriteString(ev.Text)
			saver.add(ctx, b.String())
		}
	}
	return b.String(), ctx.Err()
}
