package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// serverError digs the error code and message out of an error body in the
// shapes OpenAI ({"error":{...}}), Ollama ({"error":"..."}) and vLLM
// ({"object":"error","message":...}) use.
func serverError(body []byte) (code, typ, msg string) {
	var top struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
	}
	if json.Unmarshal(body, &top) != nil {
		return "", "", ""
	}
	var obj struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	var s string
	switch {
	case len(top.Error) > 0 && json.Unmarshal(top.Error, &obj) == nil:
		if c, ok := obj.Code.(string); ok {
			code = c
		}
		return code, obj.Type, obj.Message
	case len(top.Error) > 0 && json.Unmarshal(top.Error, &s) == nil:
		return "", "", s
	}
	return "", top.Type, top.Message
}

// mapError turns a failed request into the provider contract: the
// context's own error when ctx is done, otherwise a *protocol.Error whose
// message never contains the API key. c holds the response of an error
// status.
func (p *Provider) mapError(ctx context.Context, err error, c *model.Capture) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if c != nil && c.Status >= 400 {
		code, typ, msg := serverError(c.Body)
		return p.statusError(c.Status, c.Header, code, typ, msg)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) {
		return p.failure(true, "openai: cannot reach %s: %s; check STUDIO_OPENAI_BASE_URL and that the server is running", p.host, err.Error()).
			With("provider", providerName)
	}
	return p.failure(true, "openai: request to %s failed: %s", p.host, err.Error()).
		With("provider", providerName)
}

// statusError maps an HTTP error status (and the API's error code, type and
// message where known) to a protocol error.
func (p *Provider) statusError(status int, h http.Header, code, typ, msg string) *protocol.Error {
	detail := ""
	if code != "" {
		detail = " " + code
	}
	serverMsg := ""
	if msg = truncate(strings.TrimSpace(msg)); msg != "" {
		serverMsg = ": " + msg
	}
	var e *protocol.Error
	switch {
	case status == http.StatusTooManyRequests && (code == "insufficient_quota" || typ == "insufficient_quota"):
		e = p.failure(false, "openai: the account behind the API key has no quota left (HTTP 429%s); check billing or STUDIO_OPENAI_API_KEY / OPENAI_API_KEY", detail)
	case status == http.StatusTooManyRequests:
		e = &protocol.Error{
			Code:         protocol.RateLimited,
			Message:      p.redact(fmt.Sprintf("openai: rate limited by %s (HTTP 429%s)%s", p.host, detail, serverMsg)),
			Retryable:    true,
			RetryAfterMs: retryAfterMs(h, p.now()),
		}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// The API echoes part of the key in its 401 message, so none of the
		// server's text is used here.
		e = p.failure(false, "openai: %s rejected the API key (HTTP %d%s); check STUDIO_OPENAI_API_KEY / OPENAI_API_KEY", p.host, status, detail)
	case status == http.StatusNotFound:
		e = p.failure(false, "openai: model %q or its endpoint was not found at %s (HTTP 404%s)%s; check STUDIO_MODEL_NAME and STUDIO_OPENAI_BASE_URL", p.cfg.Model, p.host, detail, serverMsg)
	case status == http.StatusRequestTimeout || status == http.StatusConflict:
		e = p.failure(true, "openai: %s asked to retry (HTTP %d%s)%s", p.host, status, detail, serverMsg)
	case status >= 500:
		e = p.failure(true, "openai: %s failed (HTTP %d%s)%s", p.host, status, detail, serverMsg)
		e.RetryAfterMs = retryAfterMs(h, p.now())
	default:
		e = p.failure(false, "openai: %s rejected the request for model %q (HTTP %d%s)%s; check STUDIO_MODEL_NAME", p.host, p.cfg.Model, status, detail, serverMsg)
	}
	return e.With("provider", providerName).With("httpStatus", status)
}

// inStreamError maps an error object the server sent inside a 200 stream.
func (p *Provider) inStreamError(data []byte) *protocol.Error {
	code, typ, msg := serverError(data)
	if code == "rate_limit_exceeded" || typ == "rate_limit_exceeded" {
		return (&protocol.Error{
			Code:      protocol.RateLimited,
			Message:   p.redact("openai: rate limited mid-stream: " + truncate(msg)),
			Retryable: true,
		}).With("provider", providerName)
	}
	return p.failure(true, "openai: the server reported an error mid-stream: %s", truncate(msg)).
		With("provider", providerName)
}

// failure builds a model_failure with the key redacted from its message.
func (p *Provider) failure(retryable bool, format string, args ...any) *protocol.Error {
	return &protocol.Error{
		Code:      protocol.ModelFailure,
		Message:   p.redact(fmt.Sprintf(format, args...)),
		Retryable: retryable,
	}
}

// redact removes the API key from s, whatever else went wrong.
func (p *Provider) redact(s string) string { return model.Redact(s, p.cfg.APIKey) }

func truncate(s string) string { return model.TruncateServerMessage(s) }

// retryAfterMs reads how long the server asks the client to wait, in
// milliseconds: retry-after-ms, retry-after (seconds or an HTTP date), or
// OpenAI's x-ratelimit-reset-{requests,tokens} durations ("1s", "6m0s"). It
// returns 0 when no header says.
func retryAfterMs(h http.Header, now time.Time) int64 {
	var resets []model.RateLimitReset
	for _, kind := range []string{"requests", "tokens"} {
		if h == nil {
			break
		}
		d, err := time.ParseDuration(strings.TrimSpace(h.Get("x-ratelimit-reset-" + kind)))
		if err != nil {
			continue
		}
		resets = append(resets, model.RateLimitReset{Wait: d, Exhausted: strings.TrimSpace(h.Get("x-ratelimit-remaining-"+kind)) == "0"})
	}
	return model.RetryAfterMs(h, now, resets)
}
