package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/studio/operator/internal/protocol"
)

// ListWebhooks lists the webhooks (admin).
func (c *Client) ListWebhooks(ctx context.Context) ([]protocol.Webhook, error) {
	var out struct {
		Webhooks []protocol.Webhook `json:"webhooks"`
	}
	err := c.Do(ctx, http.MethodGet, "/api/admin/webhooks", nil, &out)
	return out.Webhooks, err
}

// CreateWebhook adds a webhook (admin); the answer holds its signing
// secret, once.
func (c *Client) CreateWebhook(ctx context.Context, req protocol.CreateWebhookRequest) (protocol.NewWebhook, error) {
	var out protocol.NewWebhook
	err := c.Do(ctx, http.MethodPost, "/api/admin/webhooks", req, &out)
	return out, err
}

// RemoveWebhook removes a webhook (admin).
func (c *Client) RemoveWebhook(ctx context.Context, id string) (protocol.Webhook, error) {
	var out struct {
		Webhook protocol.Webhook `json:"webhook"`
	}
	err := c.Do(ctx, http.MethodDelete, "/api/admin/webhooks/"+url.PathEscape(id), nil, &out)
	return out.Webhook, err
}

// ListDeliveries lists a webhook's recent deliveries, newest first (admin).
func (c *Client) ListDeliveries(ctx context.Context, id string) ([]protocol.WebhookDelivery, error) {
	var out struct {
		Deliveries []protocol.WebhookDelivery `json:"deliveries"`
	}
	err := c.Do(ctx, http.MethodGet, "/api/admin/webhooks/"+url.PathEscape(id)+"/deliveries", nil, &out)
	return out.Deliveries, err
}
