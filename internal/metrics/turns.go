package metrics

import "time"

// TurnSubmitted records an accepted turn.
func (r *Registry) TurnSubmitted() {
	if r == nil {
		return
	}
	r.turnsSubmitted.Inc()
}

// TurnQueueDepth sets how many accepted turns wait for a worker.
func (r *Registry) TurnQueueDepth(n int) {
	if r == nil {
		return
	}
	r.turnQueueDepth.Set(float64(n))
}

// TurnStarted records how long a turn waited queued.
func (r *Registry) TurnStarted(wait time.Duration) {
	if r == nil {
		return
	}
	r.turnQueueWait.Observe(max(wait, 0).Seconds())
}

// TurnEnded records a turn's done outcome, its error code ("" for none) and,
// when timed, how long it ran.
func (r *Registry) TurnEnded(provider, outcome, code string, d time.Duration, timed bool) {
	if r == nil {
		return
	}
	r.turnsEnded.WithLabelValues(outcome, code).Inc()
	if timed { // a turn ended by start-up recovery has no duration of its own
		r.turnDuration.WithLabelValues(provider, outcome).Observe(max(d, 0).Seconds())
	}
}

// FramesAppended records the frames an ended turn committed.
func (r *Registry) FramesAppended(outcome string, n int) {
	if r == nil || n <= 0 {
		return
	}
	r.framesAppended.WithLabelValues(outcome).Add(float64(n))
}

// ProposalDecided records one proposal transition by its audit decision.
func (r *Registry) ProposalDecided(decision string) {
	if r == nil {
		return
	}
	r.proposals.WithLabelValues(decision).Inc()
}

// EffectAcknowledged records an effect's acknowledgement (or expiry).
func (r *Registry) EffectAcknowledged(status, kind string) {
	if r == nil {
		return
	}
	r.effectAcks.WithLabelValues(status, kind).Inc()
}

// ModelRetried records a retry of a model call after a failure with code.
func (r *Registry) ModelRetried(provider, code string) {
	if r == nil {
		return
	}
	r.modelRetries.WithLabelValues(provider, code).Inc()
}
