package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// serverError reads {"type":"error","error":{"type":...,"message":...}}.
func serverError(body []byte) (typ, msg string) {
	var b struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil {
		return "", ""
	}
	return b.Error.Type, b.Error.Message
}

// statusOfType gives the HTTP status the API uses for an error type; error
// events inside a 200 stream carry only the type.
var statusOfType = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusPaymentRequired,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"timeout_error":         http.StatusGatewayTimeout,
	"api_error":             http.StatusInternalServerError,
	"overloaded_error":      529,
}

// mapError turns anything the SDK returns into the provider contract: the
// context's own error when ctx is done, otherwise a *protocol.Error whose
// message never contains the API key.
func (p *Provider) mapError(ctx context.Context, err error, c *model.Capture) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		typ, msg := string(apiErr.Type()), apiErr.Message
		if typ == "" && msg == "" {
			typ, msg = serverError([]byte(apiErr.RawJSON()))
		}
		if typ == "" && msg == "" && c != nil {
			typ, msg = serverError(c.Body)
		}
		status := apiErr.StatusCode
		var h http.Header
		midStream := status < 400
		if midStream {
			// An error event inside a 200 stream (e.g. overloaded mid-answer).
			status = statusOfType[typ]
			if status == 0 {
				status = http.StatusInternalServerError
			}
		} else if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return p.statusError(status, midStream, h, typ, msg)
	}
	if c != nil && c.Status >= 400 {
		typ, msg := serverError(c.Body)
		return p.statusError(c.Status, false, c.Header, typ, msg)
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return p.failure(true, "anthropic: the server sent a malformed stream event: %s", err.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return p.failure(true, "anthropic: the stream from %s broke off mid-answer", p.host)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) {
		return p.failure(true, "anthropic: cannot reach %s: %s", p.host, err.Error())
	}
	if strings.HasPrefix(err.Error(), "received error while streaming") {
		return p.failure(true, "anthropic: the server reported an error mid-stream")
	}
	return p.failure(true, "anthropic: request to %s failed: %s", p.host, err.Error())
}

// statusError maps an HTTP status, with the API's error type and message
// where known, to a protocol error. midStream says the error came as an
// event inside a 200 stream and status was derived from its type.
func (p *Provider) statusError(status int, midStream bool, h http.Header, typ, msg string) *protocol.Error {
	what := fmt.Sprintf("HTTP %d", status)
	if midStream {
		what = "error event mid-stream"
	}
	if typ != "" {
		what += " " + typ
	}
	serverMsg := ""
	if msg = truncate(strings.TrimSpace(msg)); msg != "" {
		serverMsg = ": " + msg
	}
	var e *protocol.Error
	switch {
	case status == http.StatusTooManyRequests:
		e = &protocol.Error{
			Code:         protocol.RateLimited,
			Message:      p.redact(fmt.Sprintf("anthropic: rate limited (%s)%s", what, serverMsg)),
			Retryable:    true,
			RetryAfterMs: retryAfterMs(h, p.now()),
		}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// None of the server's text: an auth error is about the key.
		e = p.failure(false, "anthropic: %s rejected the API key (%s); check %s", p.host, what, EnvAPIKey)
	case status == http.StatusPaymentRequired:
		e = p.failure(false, "anthropic: the account behind the API key cannot be billed (%s)%s; check billing or %s", what, serverMsg, EnvAPIKey)
	case status == http.StatusNotFound:
		e = p.failure(false, "anthropic: model %q was not found (%s)%s; check %s", p.cfg.Model, what, serverMsg, EnvModel)
	case status == http.StatusRequestTimeout || status == http.StatusConflict:
		e = p.failure(true, "anthropic: %s asked to retry (%s)%s", p.host, what, serverMsg)
	case status >= 500:
		// 529 is overloaded_error.
		e = p.failure(true, "anthropic: %s failed (%s)%s", p.host, what, serverMsg)
		e.RetryAfterMs = retryAfterMs(h, p.now())
	default:
		e = p.failure(false, "anthropic: %s rejected the request for model %q (%s)%s; check %s", p.host, p.cfg.Model, what, serverMsg, EnvModel)
	}
	e = e.With("provider", providerName).With("httpStatus", status)
	if midStream {
		e = e.With("midStream", true)
	}
	return e
}

// failure builds a model_failure with the key redacted from its message.
func (p *Provider) failure(retryable bool, format string, args ...any) *protocol.Error {
	return (&protocol.Error{
		Code:      protocol.ModelFailure,
		Message:   p.redact(fmt.Sprintf(format, args...)),
		Retryable: retryable,
	}).With("provider", providerName)
}

// redact removes the API key from s, whatever else went wrong.
func (p *Provider) redact(s string) string { return model.Redact(s, p.cfg.APIKey) }

func truncate(s string) string { return model.TruncateServerMessage(s) }

// retryAfterMs reads how long the server asks the client to wait, in
// milliseconds: retry-after-ms, retry-after (seconds or an HTTP date), or
// the anthropic-ratelimit-*-reset RFC 3339 times. It returns 0 when no
// header says.
func retryAfterMs(h http.Header, now time.Time) int64 {
	var resets []model.RateLimitReset
	for _, kind := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		if h == nil {
			break
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(h.Get("anthropic-ratelimit-"+kind+"-reset")))
		if err != nil {
			continue
		}
		resets = append(resets, model.RateLimitReset{Wait: t.Sub(now), Exhausted: strings.TrimSpace(h.Get("anthropic-ratelimit-"+kind+"-remaining")) == "0"})
	}
	return model.RetryAfterMs(h, now, resets)
}
