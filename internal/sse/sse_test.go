package sse_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/studio/operator/internal/sse"
)

// TestSetHeaders: a stream's response is an event stream that neither a
// cache nor a buffering proxy holds back.
func TestSetHeaders(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Cache-Control", "max-age=60") // a default set before is replaced
	sse.SetHeaders(rec.Header())
	rec.WriteHeader(http.StatusOK)
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
		if got := rec.Result().Header.Values(k); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
}
