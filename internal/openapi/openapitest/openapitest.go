// Package openapitest checks real HTTP answers against the daemon's OpenAPI
// document with a maintained validator (kin-openapi, JSON Schema 2020-12
// for OpenAPI 3.1): a test routes its client through Validator.Transport
// and every JSON response is validated against the operation it answers.
package openapitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/studio/operator/internal/openapi"
)

// Validator validates responses and remembers which operations it saw.
type Validator struct {
	tb     testing.TB
	router routers.Router

	mu   sync.Mutex
	seen map[string]int // operationId -> responses validated
}

// New loads and validates the document.
func New(tb testing.TB) *Validator {
	tb.Helper()
	raw, err := openapi.JSON()
	if err != nil {
		tb.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		tb.Fatalf("load the OpenAPI document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		tb.Fatalf("the OpenAPI document is invalid: %v", err)
	}
	doc.Servers = nil // match any host: tests listen on a random port
	r, err := legacy.NewRouter(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return &Validator{tb: tb, router: r, seen: map[string]int{}}
}

// Transport returns a RoundTripper that validates each answer it carries.
func (v *Validator) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(req)
		if err != nil || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp, err // streams are read by the caller, frame by frame
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return resp, nil
		}
		v.Check(req, resp.StatusCode, resp.Header, body)
		return resp, nil
	})
}

// Check validates one answer to req.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		v.tb.Errorf("openapi: %s %s is not in the document: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status:  status,
		Header:  header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		v.tb.Errorf("openapi: %s %s answered %d, which the document does not allow: %v\nbody: %.2000s", req.Method, req.URL.Path, status, err, body)
		return
	}
	v.mu.Lock()
	v.seen[route.Operation.OperationID]++
	v.mu.Unlock()
}

// Seen lists the operations whose answers were validated.
func (v *Validator) Seen() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.seen))
	for id := range v.seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
