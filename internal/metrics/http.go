package metrics

import (
	"strconv"
	"time"
)

// HTTPRequest records one answered request. route is the matched pattern
// ("GET /api/app/runs/{id}"), or "unmatched"; stream says the response was an
// SSE stream, whose duration is not a latency.
func (r *Registry) HTTPRequest(method, route string, status int, d time.Duration, stream bool) {
	if r == nil {
		return
	}
	r.httpRequests.WithLabelValues(method, route, StatusClass(status)).Inc()
	if !stream {
		r.httpDuration.WithLabelValues(method, route).Observe(d.Seconds())
	}
}

// StatusClass is "2xx" for 200..299 and so on.
func StatusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

// HTTPError records an error response's protocol error code.
func (r *Registry) HTTPError(code string) {
	if r == nil {
		return
	}
	r.httpErrors.WithLabelValues(code).Inc()
}

// MCPToolCall records one MCP tool call's outcome and latency (d zero:
// refused before it ran, not observed).
func (r *Registry) MCPToolCall(tool, outcome string, d time.Duration) {
	if r == nil {
		return
	}
	r.mcpCalls.WithLabelValues(tool, outcome).Inc()
	if d > 0 {
		r.mcpDuration.WithLabelValues(tool).Observe(d.Seconds())
	}
}

// AuthFailure records a refused credential.
func (r *Registry) AuthFailure() {
	if r == nil {
		return
	}
	r.authFailures.Inc()
}
