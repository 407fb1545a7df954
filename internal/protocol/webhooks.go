package protocol

// Webhook is a webhook on the wire: never its secret.
type Webhook struct {
	ID        string   `json:"id"`
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	Format    string   `json:"format"` // standard or slack
	CreatedAt float64  `json:"createdAt"`
	CreatedBy string   `json:"createdBy"`
}

// NewWebhook is a webhook just created: the only answer that holds
// its signing secret.
type NewWebhook struct {
	Webhook Webhook `json:"webhook"`
	Secret  string  `json:"secret"`
}

// WebhookDelivery is one event's delivery to a webhook on the wire. ID is
// the message id its requests carry (webhook-id).
type WebhookDelivery struct {
	ID            string   `json:"id"`
	Event         string   `json:"event"`
	Status        string   `json:"status"` // pending, delivered or failed
	Attempts      int      `json:"attempts"`
	LastStatus    int      `json:"lastStatus"` // the receiver's last HTTP status; 0: none
	LastError     string   `json:"lastError"`
	CreatedAt     float64  `json:"createdAt"`
	DeliveredAt   *float64 `json:"deliveredAt,omitempty"`
	NextAttemptAt *float64 `json:"nextAttemptAt,omitempty"`
}

// CreateWebhookRequest is the body of POST /api/admin/webhooks.
type CreateWebhookRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// Format is standard (the default) or slack.
	Format string `json:"format,omitempty"`
}
