package httpapi

import (
	"net/http"
	"strings"

	"github.com/studio/operator/internal/protocol"
)

// typedFallback turns what a mux answers by itself — its plain-text 404
// and 405 and its redirects (/assets → /assets/) — into typed errors
// written by refuse: the daemon never redirects and never answers untyped.
// The handlers' own answers (JSON errors, pages, assets, 304s) pass as they
// are.
func typedFallback(next http.Handler, refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fw := &fallbackWriter{ResponseWriter: w, r: r, refuse: refuse}
		next.ServeHTTP(fw, r)
	})
}

// fallbackWriter replaces an untyped 404, 405 or redirect, decided when the
// status is written, with the typed not_found.
type fallbackWriter struct {
	http.ResponseWriter
	r        *http.Request
	refuse   func(http.ResponseWriter, *http.Request, error)
	replaced bool // the handler's answer was replaced: drop its body
	wrote    bool
}

func (w *fallbackWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if untypedAnswer(code, w.Header()) {
		w.replaced = true
		h := w.Header()
		h.Del("Location")
		h.Del("Content-Length")
		allow := h.Get("Allow")
		pe := protocol.Errorf(protocol.NotFound, "no such endpoint: %s %s", w.r.Method, w.r.URL.EscapedPath())
		if allow != "" {
			pe = pe.With("allow", allow)
		}
		w.refuse(w.ResponseWriter, w.r, pe)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *fallbackWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Flush reaches the connection through the writers it wraps (a writer
// that only unwraps, such as the status recorder, is no http.Flusher).
func (w *fallbackWriter) Flush() {
	if !w.replaced {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *fallbackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// untypedAnswer reports whether a status with these headers is the mux's
// own: a redirect, or a 404 or 405 that is not JSON.
func untypedAnswer(code int, h http.Header) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return !strings.HasPrefix(h.Get("Content-Type"), "application/json")
	}
	return false
}
