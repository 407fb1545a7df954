package model

import (
	"bytes"
	"io"
	"net/http"
)

// MaxErrorBody bounds how much of an error response Capture keeps.
const MaxErrorBody = 64 << 10

// Capture records the status, headers and (for errors, bounded) body of the
// last HTTP response of one provider request, so an error keeps its status
// and the server's explanation even when an SDK could not decode the body
// (plain text, or {"error":"..."} as Ollama sends). Middleware has the
// shape of the SDKs' request middleware; it runs synchronously inside the
// call, before the call returns, so Capture needs no lock.
type Capture struct {
	Status int
	Header http.Header
	Body   []byte // error responses only
}

// Middleware sends req through next and records the response.
func (c *Capture) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if res != nil {
		c.Status = res.StatusCode
		c.Header = res.Header.Clone()
		if res.StatusCode >= 400 && res.Body != nil {
			body, _ := io.ReadAll(io.LimitReader(res.Body, MaxErrorBody))
			_ = res.Body.Close()
			c.Body = body
			res.Body = io.NopCloser(bytes.NewReader(body))
		}
	}
	return res, err
}
