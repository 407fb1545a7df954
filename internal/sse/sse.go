// Package sse holds what the daemon's Server-Sent Events responses share:
// their headers, and the defaults of their heartbeat and of the bound on
// one write. Each stream (the operator's conversation stream, the
// application's change events, an AG-UI run) writes its own events; a
// stream is a plain HTTP response, kept open and flushed event by event.
package sse

import (
	"net/http"
	"time"
)

const (
	// DefaultHeartbeat is the interval of the comment heartbeats on a
	// quiet stream: they keep proxies and load balancers from closing an
	// idle connection, and show a dead client to the next write.
	DefaultHeartbeat = 15 * time.Second
	// DefaultWriteTimeout bounds one write to a client: one that does
	// not read is cut off, never buffered for.
	DefaultWriteTimeout = 30 * time.Second
)

// SetHeaders sets an event stream's response headers: its media type, no
// caching (a stream is never served again from a cache), and no buffering
// by a proxy in front (nginx's X-Accel-Buffering), so that each event
// reaches the client when it is flushed.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
}
