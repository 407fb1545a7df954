package metrics

import "github.com/prometheus/client_golang/prometheus"

// LeaseStats is what a daemon's lease keeper counts (several
// daemons on one database).
type LeaseStats struct {
	Instances     int   // live instances sharing the database, as last seen
	Renewals      int64 // lease renewals
	RenewFailures int64 // renewals the database refused or did not answer
	Reaped        int64 // instances whose lease expired that this daemon reaped
}

// ObserveLeases exposes the lease keeper's counters, read from stats at
// each scrape. Call it once.
func (r *Registry) ObserveLeases(stats func() LeaseStats) {
	if r == nil {
		return
	}
	r.register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "studio_instances",
			Help: "Live daemon instances sharing the database (this one included), as this daemon last saw them."},
			func() float64 { return float64(stats().Instances) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "studio_lease_renewals_total",
			Help: "Lease renewals of this daemon."},
			func() float64 { return float64(stats().Renewals) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "studio_lease_renewal_failures_total",
			Help: "Lease renewals of this daemon that the database refused or did not answer."},
			func() float64 { return float64(stats().RenewFailures) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "studio_lease_reaped_instances_total",
			Help: "Instances whose lease expired that this daemon's reaper took over."},
			func() float64 { return float64(stats().Reaped) }),
	)
}
