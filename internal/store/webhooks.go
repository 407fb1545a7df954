package store

import (
	"context"
	"slices"
	"time"
)

// Webhook events: what the outbox records, in the transaction of the
// state change that causes each.
const (
	// EventProposalPending: a proposal waits for a human's decision.
	EventProposalPending = "proposal.pending"
	// EventProposalDecided: a human confirmed or denied a proposal.
	EventProposalDecided = "proposal.decided"
	// EventTurnFailed: a turn ended failed.
	EventTurnFailed = "turn.failed"
	// EventRunFailed: an application run ended failed.
	EventRunFailed = "run.failed"
)

// WebhookEvents lists every event a webhook may subscribe to.
var WebhookEvents = []string{EventProposalPending, EventProposalDecided, EventTurnFailed, EventRunFailed}

// ValidWebhookEvent reports whether e is one of WebhookEvents.
func ValidWebhookEvent(e string) bool { return slices.Contains(WebhookEvents, e) }

// WebhookFormat is the body a webhook receives.
type WebhookFormat string

// Webhook formats.
const (
	// FormatStandard: {"type", "timestamp", "data"} (Standard Webhooks).
	FormatStandard WebhookFormat = "standard"
	// FormatSlack: a Slack-compatible {"text": ...}.
	FormatSlack WebhookFormat = "slack"
)

// DeliveryStatus is a delivery's state.
type DeliveryStatus string

// Delivery states.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryDelivered DeliveryStatus = "delivered"
	DeliveryFailed    DeliveryStatus = "failed"
)

// Webhook is a row of studio_webhooks. Secret is the signing secret
// (whsec_...), kept as given: every delivery is signed with it.
type Webhook struct {
	ID         string
	URL        string
	Events     []string
	Format     WebhookFormat
	Secret     string
	CreatedAt  time.Time
	CreatedBy  string
	DisabledAt *time.Time
}

// Delivery is a row of studio_webhook_deliveries: one event for one
// webhook. ID is the message id (the webhook-id header), the same on
// every attempt.
type Delivery struct {
	ID            string
	WebhookID     string
	Event         string
	Payload       []byte // the standard body, as signed
	Status        DeliveryStatus
	Attempts      int
	NextAttemptAt time.Time
	LastStatus    int // the receiver's last HTTP status; 0: none (no answer)
	LastError     string
	CreatedAt     time.Time
	DeliveredAt   *time.Time
	// ClaimedBy is the dispatcher's instance holding the delivery until
	// ClaimExpiresAt; ClaimEpoch counts the claims (its fencing token).
	ClaimedBy      string
	ClaimExpiresAt *time.Time
	ClaimEpoch     int64
}

// ClaimedDelivery is a delivery a dispatcher claimed, with what it needs
// to post it.
type ClaimedDelivery struct {
	Delivery
	URL    string
	Format WebhookFormat
	Secret string
}

// WebhookStore keeps webhooks and the outbox of their deliveries. The
// deliveries themselves are written by the state changes (proposals,
// turns, runs), one per subscribed webhook that is not disabled.
type WebhookStore interface {
	// CreateWebhook adds a webhook; an unknown event or format is validation.
	CreateWebhook(ctx context.Context, p CreateWebhookParams) (Webhook, error)
	// GetWebhook returns a webhook, disabled or not; not_found if absent.
	GetWebhook(ctx context.Context, id string) (Webhook, error)
	// ListWebhooks lists the webhooks that are not disabled, oldest first.
	ListWebhooks(ctx context.Context) ([]Webhook, error)
	// RemoveWebhook disables a webhook: no new deliveries, and its pending
	// ones fail. Not found (or removed already) is not_found.
	RemoveWebhook(ctx context.Context, p RemoveWebhookParams) (Webhook, error)
	// GetDelivery returns one delivery as it is now (its claim included);
	// not_found if absent.
	GetDelivery(ctx context.Context, id string) (Delivery, error)
	// ListDeliveries lists a webhook's deliveries, newest first.
	ListDeliveries(ctx context.Context, p ListDeliveriesParams) ([]Delivery, error)
	// ClaimDeliveries claims up to Limit due pending deliveries (next
	// attempt at or before Now, no live claim) for Instance until Now +
	// Lease. Concurrent claimers take different rows (SKIP LOCKED where
	// rows are locked).
	ClaimDeliveries(ctx context.Context, p ClaimDeliveriesParams) ([]ClaimedDelivery, error)
	// RecordDeliveryAttempt records one attempt of a claimed delivery and
	// releases the claim. A claim lost (expired and taken by another
	// claimer: other instance or epoch) is conflict, and nothing changes.
	RecordDeliveryAttempt(ctx context.Context, p RecordDeliveryAttemptParams) (Delivery, error)
	// OldestDueDelivery is the creation time of the oldest pending
	// delivery due at Now; nil when none is due.
	OldestDueDelivery(ctx context.Context, now time.Time) (*time.Time, error)
}

// DeliveriesQueued is the control key (InstanceStore.ControlSignal) a
// commit that writes deliveries notifies: every daemon's dispatcher may
// claim them.
const DeliveriesQueued = "webhooks-queued"

// CreateWebhookParams creates a webhook.
type CreateWebhookParams struct {
	ID        string
	URL       string
	Events    []string
	Format    WebhookFormat
	Secret    string
	CreatedBy string
	Now       time.Time
	Audit     *AppendAdminEventParams
}

// RemoveWebhookParams removes (disables) a webhook.
type RemoveWebhookParams struct {
	ID    string
	Now   time.Time
	Audit *AppendAdminEventParams
}

// ListDeliveriesParams pages a webhook's deliveries.
type ListDeliveriesParams struct {
	WebhookID string
	Limit     int // 0: 100
}

// ClaimDeliveriesParams claims due deliveries.
type ClaimDeliveriesParams struct {
	Instance string
	Now      time.Time
	Lease    time.Duration
	Limit    int
}

// RecordDeliveryAttemptParams records one attempt: delivered (Status
// DeliveryDelivered), to try again at NextAttemptAt (DeliveryPending) or
// given up (DeliveryFailed).
type RecordDeliveryAttemptParams struct {
	ID            string
	Instance      string
	Epoch         int64
	Status        DeliveryStatus
	HTTPStatus    int
	Error         string
	NextAttemptAt time.Time
	Now           time.Time
}
