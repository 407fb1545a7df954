// Package modeltest is the fake streaming server the remote providers'
// tests share: a real HTTP server on loopback that records every request
// (method, path, headers, body) and answers with a handler, and helpers
// that write a Server-Sent Events stream chunk by chunk, flushing each; and
// Exercise, the conformance suite both remote providers pass.
package modeltest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/studio/operator/internal/model"
)

// Fake is a provider API server that records what it receives.
type Fake struct {
	Server *httptest.Server
	mu     sync.Mutex
	req    []Request
}

// Request is one request the fake received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// New starts a fake answering with h; it stops when the test ends.
func New(t testing.TB, h http.HandlerFunc) *Fake {
	t.Helper()
	f := &Fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.req = append(f.req, Request{r.Method, r.URL.Path, r.Header.Clone(), body})
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Server.Close)
	return f
}

// URL is the fake's base URL.
func (f *Fake) URL() string { return f.Server.URL }

// Client is an HTTP client for the fake.
func (f *Fake) Client() *http.Client { return f.Server.Client() }

// Requests returns what the fake received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.req...)
}

// OnlyPost is the one request the fake received, which must be a POST to
// path.
func (f *Fake) OnlyPost(t testing.TB, path string) Request {
	t.Helper()
	reqs := f.Requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodPost || reqs[0].Path != path {
		t.Fatalf("the server saw %+v, want one POST %s", reqs, path)
	}
	return reqs[0]
}

// Stream answers requests to path with an event stream: each chunk is
// written as it is and flushed; other paths are 404. header, if set,
// adds response headers.
func Stream(path string, header http.Header, chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		for k, v := range header {
			w.Header()[k] = v
		}
		fl := w.(http.Flusher)
		for _, c := range chunks {
			_, _ = io.WriteString(w, c)
			fl.Flush()
		}
	}
}

// Collect gathers a stream's text and tool call events until its end or
// its first error; usage events are left out (LastUsage checks them).
func Collect(ctx context.Context, p model.Provider, req model.Request) ([]model.Event, error) {
	var evs []model.Event
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			return evs, err
		}
		if ev.Kind != model.EventUsage {
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// LastUsage streams req and returns the usage event, which must come last.
func LastUsage(t testing.TB, p model.Provider, req model.Request) model.Usage {
	t.Helper()
	var last model.Event
	for ev, err := range p.Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if last.Kind != model.EventUsage {
		t.Fatalf("the last event is %+v, not the usage", last)
	}
	return last.Usage
}
