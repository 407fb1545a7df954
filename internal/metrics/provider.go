package metrics

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// InstrumentProvider wraps a model provider so every call records its time
// to first event, its duration and outcome, its failure code and the tokens
// the provider reported, under the provider label name: the configured
// model's name (--provider NAME=..., or the kind for --model KIND), which
// tells two providers of one kind apart. Usage events are consumed here
// and not passed on.
// The wrapper keeps the provider's name and, when it has one, its health
// check (doctor tells a provider without a check from a healthy one).
func InstrumentProvider(p model.Provider, name string, r *Registry) model.Provider {
	if r == nil {
		return p
	}
	in := instrumented{p: p, r: r, name: name}
	if c, ok := p.(model.Checker); ok {
		return checkedProvider{in, c}
	}
	return in
}

type instrumented struct {
	p    model.Provider
	r    *Registry
	name string // the provider label
}

type checkedProvider struct {
	instrumented
	c model.Checker
}

func (c checkedProvider) Check(ctx context.Context) error { return c.c.Check(ctx) }

func (i instrumented) Name() string { return i.p.Name() }

func (i instrumented) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		name := i.name
		start := time.Now()
		first := true
		outcome, code := OutcomeOK, ""
		defer func() { i.r.ModelCall(name, outcome, code, time.Since(start)) }()
		for ev, err := range i.p.Stream(ctx, req) {
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, context.Canceled) {
					outcome = OutcomeCancelled
				} else {
					outcome, code = OutcomeError, string(protocol.ErrorOf(err).Code)
				}
				yield(ev, err)
				return
			}
			if ev.Kind == model.EventUsage {
				i.r.ModelTokens(name, ev.Usage.InputTokens, ev.Usage.OutputTokens)
				continue
			}
			if first {
				first = false
				i.r.ModelFirstToken(name, time.Since(start))
			}
			if !yield(ev, nil) {
				if ctx.Err() != nil {
					outcome = OutcomeCancelled
				}
				return
			}
		}
		if ctx.Err() != nil {
			outcome = OutcomeCancelled
		}
	}
}

// ModelFirstToken records the time to a call's first event.
func (r *Registry) ModelFirstToken(provider string, d time.Duration) {
	if r == nil {
		return
	}
	r.modelFirstToken.WithLabelValues(provider).Observe(max(d, 0).Seconds())
}

// ModelCall records a finished call: outcome is ok, error or cancelled, code
// the protocol error code of an error.
func (r *Registry) ModelCall(provider, outcome, code string, d time.Duration) {
	if r == nil {
		return
	}
	r.modelCalls.WithLabelValues(provider, outcome).Inc()
	r.modelDuration.WithLabelValues(provider, outcome).Observe(max(d, 0).Seconds())
	if outcome == OutcomeError {
		r.modelFailures.WithLabelValues(provider, code).Inc()
	}
}

// ModelTokens records the tokens a provider reported for one call.
func (r *Registry) ModelTokens(provider string, input, output int64) {
	if r == nil {
		return
	}
	if input > 0 {
		r.modelTokens.WithLabelValues(provider, "input").Add(float64(input))
	}
	if output > 0 {
		r.modelTokens.WithLabelValues(provider, "output").Add(float64(output))
	}
}

// Model call outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"
	OutcomeCancelled = "cancelled"
)
