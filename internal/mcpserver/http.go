package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// Handler is the stateless Streamable HTTP endpoint. The edge in front of
// it (httpapi) authenticated the principal and checked Host and Origin;
// here a tools/call is decided by the policy (403) and the principal's
// rate limit (429, rate_limited with retryAfterMs) before the SDK sees it,
// and each call is decided again where it runs (decided). refuse writes a
// typed error with its status.
func (s *Server) Handler(refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(policy.WithDoor(r.Context(), policy.DoorMCP))
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
			if err != nil {
				refuse(w, r, protocol.Errorf(protocol.Validation, "the request body could not be read"))
				return
			}
			if len(body) > MaxBody {
				refuse(w, r, protocol.Errorf(protocol.Validation, "the request body is larger than %d bytes", MaxBody))
				return
			}
			if err := s.admit(r, body); err != nil {
				refuse(w, r, err)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		s.handler.ServeHTTP(w, r.WithContext(WithBase(r.Context(), scheme+"://"+r.Host)))
	})
}

// admit decides a tools/call (mayCall) and checks the caller's rate limit.
func (s *Server) admit(r *http.Request, body []byte) error {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
		return nil // the SDK answers malformed messages and other methods
	}
	p, err := principal(r.Context())
	if err != nil {
		return err
	}
	if _, known := s.offered[msg.Params.Name]; !known {
		return nil // the SDK answers an unknown tool
	}
	if err := s.mayCall(r.Context(), msg.Params.Name); err != nil {
		s.cfg.Metrics.MCPToolCall(msg.Params.Name, "role_denied", 0)
		return err
	}
	if ok, wait := s.limit.take(p.ID); !ok {
		s.cfg.Metrics.MCPToolCall(msg.Params.Name, string(protocol.RateLimited), 0)
		return &protocol.Error{Code: protocol.RateLimited, Retryable: true, RetryAfterMs: max(wait.Milliseconds(), 1),
			Message: "too many tool calls from this principal; try again shortly",
			Details: map[string]any{"limit": "mcp_calls_per_minute", "max": s.cfg.CallsPerMinute}}
	}
	return nil
}
