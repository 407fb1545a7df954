package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WebhookAttempt records one delivery attempt of the webhook outbox, by
// event (proposal.pending, ...) and outcome (delivered, retry, failed).
func (r *Registry) WebhookAttempt(event, outcome string) {
	if r == nil {
		return
	}
	r.webhookDeliveries.WithLabelValues(event, outcome).Inc()
}

// ObserveWebhookQueue exposes the age of the oldest due webhook delivery,
// read from age at each scrape (the last good reading when it fails).
// Call it once.
func (r *Registry) ObserveWebhookQueue(age func() (time.Duration, error)) {
	if r == nil {
		return
	}
	r.register(lastGoodGauge(prometheus.GaugeOpts{Name: "studio_webhook_queue_age_seconds",
		Help: "How long the oldest webhook delivery that is due has waited since its event (0: none is due; all daemons on the database). It grows while a receiver refuses or the dispatchers fall behind."},
		func() (float64, error) {
			d, err := age()
			return d.Seconds(), err
		}))
}
