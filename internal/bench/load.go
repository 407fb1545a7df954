package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// loadResult is what one turn of the load tool saw.
type loadResult struct {
	accept, firstFrame, done time.Duration
	frames                   int
	outcome                  protocol.Outcome
	err                      error
}

// RunLoad drives a running daemon through cl: conversations at once, each
// submitting turns one after another and following each on its stream to
// its done frame, and writes throughput and latency percentiles to out.
func RunLoad(ctx context.Context, out io.Writer, cl *apiclient.Client, conversations, turns int, instruction string) error {
	if conversations < 1 || turns < 1 {
		return fmt.Errorf("--conversations and --turns must be at least 1")
	}
	start := time.Now()
	results := make(chan loadResult, conversations*turns)
	var wg sync.WaitGroup
	title := "load"
	for range conversations {
		wg.Go(func() {
			conv, err := cl.CreateConversation(ctx, protocol.CreateConversationRequest{Title: &title})
			if err != nil {
				results <- loadResult{err: err}
				return
			}
			last := int64(0)
			for range turns {
				r := loadTurn(ctx, cl, conv.ID, &last, instruction)
				results <- r
				if r.err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	close(results)
	elapsed := time.Since(start)

	var accept, first, done []time.Duration
	frames, completed := 0, 0
	failures := map[string]int{}
	for r := range results {
		if r.err != nil {
			failures[string(protocol.ErrorOf(r.err).Code)+": "+r.err.Error()]++
			continue
		}
		accept, first, done = append(accept, r.accept), append(first, r.firstFrame), append(done, r.done)
		frames += r.frames
		if r.outcome == protocol.OutcomeCompleted {
			completed++
		} else {
			failures["outcome "+string(r.outcome)]++
		}
	}
	fmt.Fprintf(out, "%d conversations x %d turns in %s: %d turns done (%d completed), %.1f turns/s, %.0f frames/s\n",
		conversations, turns, elapsed.Round(time.Millisecond), len(done), completed,
		float64(len(done))/elapsed.Seconds(), float64(frames)/elapsed.Seconds())
	for _, row := range []struct {
		name string
		ds   []time.Duration
	}{{"accept", accept}, {"first frame", first}, {"done", done}} {
		fmt.Fprintf(out, "%-12s p50 %-10s p95 %-10s p99 %-10s max %s\n", row.name, pct(row.ds, 50), pct(row.ds, 95), pct(row.ds, 99), pct(row.ds, 100))
	}
	for f, n := range failures {
		fmt.Fprintf(out, "failed %d: %s\n", n, f)
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d failures", len(failures))
	}
	return nil
}

// loadTurn submits one turn and follows it to its done frame.
func loadTurn(ctx context.Context, cl *apiclient.Client, convID string, last *int64, instruction string) loadResult {
	t0 := time.Now()
	acc, err := cl.SubmitTurn(ctx, convID, protocol.TurnRequest{Instruction: instruction,
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: last})
	if err != nil {
		return loadResult{err: err}
	}
	r := loadResult{accept: time.Since(t0)}
	err = cl.Stream(ctx, convID, acc.AcceptedSequence, func(f protocol.Frame) error {
		if f.RequestID != acc.RequestID {
			return nil
		}
		r.frames++
		if r.frames == 1 {
			r.firstFrame = time.Since(t0)
		}
		if d, ok := f.Payload.(protocol.DonePayload); ok {
			r.done, r.outcome = time.Since(t0), d.Outcome
			*last = d.LastSequence
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		r.err = err
	}
	return r
}

func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min((len(s)*p+99)/100, len(s)) - 1
	return s[max(i, 0)].Round(100 * time.Microsecond).String()
}
