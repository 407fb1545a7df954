// Package webhooks delivers the webhook outbox: a Dispatcher claims the
// due deliveries that state changes wrote to StateDB (store.WebhookStore),
// posts each, signed as the Standard Webhooks specification says, and
// records the attempt: delivered, tried again later with exponential
// backoff and jitter, or failed after about a day. Delivery is at least
// once: a daemon that dies after the post and before recording it leaves
// a claim that expires, and another attempt follows with the same
// webhook-id, for the receiver to recognise.
//
// Several daemons on one database each run a dispatcher; each delivery is
// claimed by one of them at a time (the store's claim), and a dispatcher
// whose claim expired cannot record over the new claimer's. Nor does it
// post under a claim it lost: right before the post it reads the delivery
// again (still pending, still its claim), and the post's deadline ends
// before the claim does, so a dispatcher paused between its claim and its
// post (a GC pause, a frozen VM) does not post what another may have
// delivered since. A receiver then sees a delivery twice only when the
// answer to an attempt was lost: the dispatcher that posted it stopped
// before recording it.
package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
)

// Store is what a Dispatcher needs of StateDB.
type Store interface {
	ClaimDeliveries(ctx context.Context, p store.ClaimDeliveriesParams) ([]store.ClaimedDelivery, error)
	GetDelivery(ctx context.Context, id string) (store.Delivery, error)
	RecordDeliveryAttempt(ctx context.Context, p store.RecordDeliveryAttemptParams) (store.Delivery, error)
	OldestDueDelivery(ctx context.Context, now time.Time) (*time.Time, error)
	ControlSignal(key string) <-chan struct{}
}

// Outcomes of an attempt, as the Observer hears them.
const (
	OutcomeDelivered = "delivered"
	OutcomeRetry     = "retry"  // refused or unanswered; tried again later
	OutcomeFailed    = "failed" // refused or unanswered for the last time
)

// Observer hears every attempt's outcome (metrics).
type Observer interface {
	WebhookAttempt(event, outcome string)
}

// Defaults.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 4
	DefaultPoll        = 5 * time.Second
)

// Config configures a Dispatcher.
type Config struct {
	Store Store
	// Instance names this daemon in the deliveries it claims.
	Instance string
	// Client posts the deliveries; default: one that follows no redirect
	// (a 3xx is a refusal, as the specification says).
	Client *http.Client
	// Timeout bounds one post (default DefaultTimeout).
	Timeout time.Duration
	// Concurrency bounds the posts in flight (default DefaultConcurrency).
	Concurrency int
	// Poll is how often due retries are looked for besides the wake-up
	// on new deliveries (default DefaultPoll).
	Poll time.Duration
	// Lease is how long a claim lasts (default: twice Timeout and 30 s):
	// past it, another dispatcher may post the delivery again.
	Lease   time.Duration
	Backoff Backoff
	// PublicURL is the cockpit's address, for the links of Slack messages
	// ("" leaves them out).
	PublicURL string
	// Now is the clock (default time.Now); Rand the jitter in [0, 1)
	// (default math/rand).
	Now      func() time.Time
	Rand     func() float64
	Observer Observer
	Logger   *slog.Logger
}

// Dispatcher posts the outbox's deliveries.
type Dispatcher struct {
	cfg Config
	log *slog.Logger
}

// New returns a Dispatcher; Run runs it.
func New(cfg Config) *Dispatcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 2*cfg.Timeout + 30*time.Second
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{cfg: cfg, log: log}
}

// Run delivers until ctx ends: at once when a commit queues deliveries
// (on any daemon sharing the database), and every Poll for the retries
// that come due.
func (d *Dispatcher) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		// Taken before the claim: a delivery committed meanwhile wakes us.
		queued := d.cfg.Store.ControlSignal(store.DeliveriesQueued)
		if _, err := d.DeliverDue(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("webhook deliveries: claim failed; trying again", "err", err)
		}
		t.Reset(d.cfg.Poll)
		select {
		case <-ctx.Done():
			return
		case <-queued:
		case <-t.C:
		}
	}
}

// DeliverDue claims and posts every delivery due now, at most
// Concurrency at once, and returns when none is left due; n is the
// attempts made.
func (d *Dispatcher) DeliverDue(ctx context.Context) (n int, err error) {
	// A read first: an idle daemon polls without a write transaction.
	if oldest, err := d.cfg.Store.OldestDueDelivery(ctx, d.cfg.Now()); err != nil || oldest == nil {
		return 0, err
	}
	slots := make(chan struct{}, d.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return n, ctx.Err()
		}
		cs, err := d.cfg.Store.ClaimDeliveries(ctx, store.ClaimDeliveriesParams{Instance: d.cfg.Instance, Now: d.cfg.Now(),
			Lease: d.cfg.Lease, Limit: 1})
		if err != nil || len(cs) == 0 {
			<-slots
			return n, err
		}
		n++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			d.deliver(ctx, cs[0])
		}()
	}
}

// claimMargin is how long before its claim expires a post must end.
const claimMargin = time.Second

// deliver posts one claimed delivery and records the attempt, if the
// claim still holds (held).
func (d *Dispatcher) deliver(ctx context.Context, c store.ClaimedDelivery) {
	deadline, ok := d.held(ctx, c)
	if !ok {
		return // the next claim (this dispatcher's or another's) posts it
	}
	pctx, cancel := context.WithDeadline(ctx, deadline)
	status, perr := d.post(pctx, c)
	cancel()
	now := d.cfg.Now()
	rec := store.RecordDeliveryAttemptParams{ID: c.ID, Instance: d.cfg.Instance, Epoch: c.ClaimEpoch, HTTPStatus: status, Now: now}
	outcome := OutcomeDelivered
	if perr == nil {
		rec.Status = store.DeliveryDelivered
	} else {
		rec.Error = perr.Error()
		next, ok := d.cfg.Backoff.Next(c.CreatedAt, now, c.Attempts+1, d.cfg.Rand())
		if ok {
			rec.Status, rec.NextAttemptAt, outcome = store.DeliveryPending, next, OutcomeRetry
		} else {
			rec.Status, outcome = store.DeliveryFailed, OutcomeFailed
		}
	}
	// The record outlives a shutdown's cancel: the post happened.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	defer cancel()
	if _, err := d.cfg.Store.RecordDeliveryAttempt(rctx, rec); err != nil {
		if protocol.IsCode(err, protocol.Conflict) {
			d.log.Info("webhook delivery claim lost; another dispatcher has it", "delivery", c.ID)
		} else {
			d.log.Warn("record webhook delivery attempt", "delivery", c.ID, "err", err)
		}
		return
	}
	if d.cfg.Observer != nil {
		d.cfg.Observer.WebhookAttempt(c.Event, outcome)
	}
	switch outcome {
	case OutcomeRetry:
		d.log.Info("webhook delivery refused; will retry", "delivery", c.ID, "event", c.Event, "webhook", c.WebhookID,
			"status", status, "err", rec.Error, "next_attempt", rec.NextAttemptAt)
	case OutcomeFailed:
		d.log.Warn("webhook delivery failed for good", "delivery", c.ID, "event", c.Event, "webhook", c.WebhookID,
			"attempts", c.Attempts+1, "status", status, "err", rec.Error)
	}
}

// held checks, before a post, that the delivery is still pending under
// this dispatcher's claim, with time left to post it; deadline is when
// the post must end: its timeout, or the claim's end less a margin.
func (d *Dispatcher) held(ctx context.Context, c store.ClaimedDelivery) (deadline time.Time, ok bool) {
	now := d.cfg.Now()
	deadline = now.Add(d.cfg.Timeout)
	if c.ClaimExpiresAt != nil {
		if end := c.ClaimExpiresAt.Add(-claimMargin); end.Before(deadline) {
			deadline = end
		}
	}
	if !now.Before(deadline) {
		d.log.Warn("webhook delivery claim ran out before its post (this dispatcher was held up): not posted, left for the next claim",
			"delivery", c.ID, "claim_expires_at", c.ClaimExpiresAt)
		return deadline, false
	}
	// From here on the deadline is the process's clock's: the claim's is
	// the dispatcher's (Config.Now), measured from now.
	deadline = time.Now().Add(deadline.Sub(now))
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	cur, err := d.cfg.Store.GetDelivery(rctx, c.ID)
	switch {
	case err != nil:
		d.log.Warn("webhook delivery: its claim could not be checked; not posted, left for the next claim", "delivery", c.ID, "err", err)
		return deadline, false
	case cur.Status != store.DeliveryPending || cur.ClaimedBy != d.cfg.Instance || cur.ClaimEpoch != c.ClaimEpoch:
		d.log.Info("webhook delivery claim lost before its post; another dispatcher has it", "delivery", c.ID,
			"status", cur.Status, "claimed_by", cur.ClaimedBy)
		return deadline, false
	}
	return deadline, true
}

// post sends the delivery, signed; status is the receiver's answer (0:
// none), err non-nil unless it was 2xx.
func (d *Dispatcher) post(ctx context.Context, c store.ClaimedDelivery) (int, error) {
	redact.AddKnown(c.Secret, c.URL) // a receiver another daemon added is known here too
	body := c.Payload
	if c.Format == store.FormatSlack {
		b, err := SlackBody(c.Event, c.Payload, d.cfg.PublicURL)
		if err != nil {
			return 0, err
		}
		body = b
	}
	ts := d.cfg.Now().Unix()
	sig, err := Sign(c.Secret, c.ID, ts, body)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "studio-webhooks")
	req.Header.Set("webhook-id", c.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		var uerr interface{ Timeout() bool }
		if errors.As(err, &uerr) && uerr.Timeout() {
			return 0, fmt.Errorf("no answer within %s", d.cfg.Timeout)
		}
		if cause := errors.Unwrap(err); cause != nil {
			return 0, cause // the url.Error's cause: the URL is the webhook's already
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection reusable
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// QueueAge is how long the oldest due delivery has waited (0: none is
// due): the gauge of a backlog.
func (d *Dispatcher) QueueAge(ctx context.Context) (time.Duration, error) {
	now := d.cfg.Now()
	oldest, err := d.cfg.Store.OldestDueDelivery(ctx, now)
	if err != nil || oldest == nil {
		return 0, err
	}
	return max(now.Sub(*oldest), 0), nil
}
