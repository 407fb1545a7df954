// Package protocol owns the operator protocol's wire contract
// (docs/protocol.md; docs/design.md §4): the version-1 frame envelope and its
// eight payloads, UI effects, command proposals, request bodies, the stable
// error codes with their HTTP status table, and strict decoding. It imports
// nothing of the project's, so every other package may import it.
package protocol

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrorCode is one of the protocol's fourteen stable error codes, or the
// extension access_revoked.
type ErrorCode string

// The stable error codes (docs/design.md §4).
const (
	AuthRequired     ErrorCode = "auth_required"
	Validation       ErrorCode = "validation"
	NotFound         ErrorCode = "not_found"
	Denied           ErrorCode = "denied"
	Conflict         ErrorCode = "conflict"
	StaleContext     ErrorCode = "stale_context"
	RateLimited      ErrorCode = "rate_limited"
	ModelFailure     ErrorCode = "model_failure"
	ServiceFailure   ErrorCode = "service_failure"
	ServiceRestarted ErrorCode = "service_restarted"
	AuditUnavailable ErrorCode = "audit_unavailable"
	ReplayGap        ErrorCode = "replay_gap"
	Cancelled        ErrorCode = "cancelled"
	ProtocolVersion  ErrorCode = "protocol_version"
	// AccessRevoked (an extension of the fourteen) ends an open
	// stream whose right to read was taken away: its token revoked, its
	// principal disabled or given another role, its conversation made
	// private.
	AccessRevoked ErrorCode = "access_revoked"
)

// statusOf is the one table from error code to HTTP status (docs/design.md §4).
var statusOf = map[ErrorCode]int{
	AuthRequired:     http.StatusUnauthorized,
	Validation:       http.StatusBadRequest,
	NotFound:         http.StatusNotFound,
	Denied:           http.StatusForbidden,
	Conflict:         http.StatusConflict,
	StaleContext:     http.StatusConflict,
	RateLimited:      http.StatusTooManyRequests,
	ModelFailure:     http.StatusBadGateway,
	ServiceFailure:   http.StatusServiceUnavailable,
	ServiceRestarted: http.StatusServiceUnavailable,
	AuditUnavailable: http.StatusServiceUnavailable,
	ReplayGap:        http.StatusConflict,
	Cancelled:        http.StatusConflict,
	ProtocolVersion:  http.StatusBadRequest,
	AccessRevoked:    http.StatusForbidden,
}

// ErrorCodes lists every stable code, in the protocol's order, then the
// extension.
var ErrorCodes = []ErrorCode{
	AuthRequired, Validation, NotFound, Denied, Conflict, StaleContext, RateLimited,
	ModelFailure, ServiceFailure, ServiceRestarted, AuditUnavailable, ReplayGap,
	Cancelled, ProtocolVersion, AccessRevoked,
}

// Valid reports whether c is one of the stable codes.
func (c ErrorCode) Valid() bool { _, ok := statusOf[c]; return ok }

// HTTPStatus maps a code to its HTTP status; unknown codes are 500.
func (c ErrorCode) HTTPStatus() int {
	if s, ok := statusOf[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is the protocol's ProtocolError (docs/protocol.md §2). It is both the
// Go error every layer returns and the JSON object clients see.
type Error struct {
	Code         ErrorCode      `json:"code"`
	Message      string         `json:"message"`
	Retryable    bool           `json:"retryable"`
	RetryAfterMs int64          `json:"retryAfterMs,omitzero"`
	Details      map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf builds an Error with the code's default retryability.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Retryable: defaultRetryable(code)}
}

// With returns a copy of e with one detail added.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Details = make(map[string]any, len(e.Details)+1)
	for k, v := range e.Details {
		c.Details[k] = v
	}
	c.Details[key] = value
	return &c
}

// defaultRetryable says whether a retry of the same request can succeed
// unchanged. Conflict and stale context need a refresh first (docs/design.md §4).
func defaultRetryable(c ErrorCode) bool {
	switch c {
	case RateLimited, ServiceFailure, ServiceRestarted, AuditUnavailable:
		return true
	}
	return false
}

// ErrorOf returns err as a protocol Error. Errors that carry no code become
// service_failure with a generic message, so internals never leak to clients.
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Code: ServiceFailure, Message: "internal service failure", Retryable: true}
}

// CodeOf returns the code of err, or "" when err carries none.
func CodeOf(err error) ErrorCode {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// IsCode reports whether err carries the code c.
func IsCode(err error, c ErrorCode) bool { return CodeOf(err) == c }
