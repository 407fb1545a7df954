package metrics

import "time"

// RunStarted records a playbook run that began executing; call the
// returned function when it ends.
func (r *Registry) RunStarted() (ended func()) {
	if r == nil {
		return func() {}
	}
	r.runsRunning.Inc()
	return r.runsRunning.Dec
}

// RunFinished records a playbook run's final status and duration.
func (r *Registry) RunFinished(status string, d time.Duration) {
	if r == nil {
		return
	}
	r.runsFinished.WithLabelValues(status).Inc()
	r.runDuration.WithLabelValues(status).Observe(max(d, 0).Seconds())
}

// ScheduleFired records a launched schedule slot's lag behind its due time
// and the slots skipped on the way.
func (r *Registry) ScheduleFired(lag time.Duration, skipped int64) {
	if r == nil {
		return
	}
	if lag >= 0 {
		r.schedulerLag.Observe(lag.Seconds())
	}
	if skipped > 0 {
		r.schedulesSkip.Add(float64(skipped))
	}
}
