package protocol_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

// TestHTTPStatusTable: every one of the fourteen codes, and the extension
// access_revoked, has its status (docs/design.md §4; service_restarted and
// cancelled, which reach HTTP only inside turn frames, and access_revoked,
// which ends an open stream, map to the nearest kin).
func TestHTTPStatusTable(t *testing.T) {
	t.Parallel()
	want := map[protocol.ErrorCode]int{
		protocol.AuthRequired:     http.StatusUnauthorized,
		protocol.Validation:       http.StatusBadRequest,
		protocol.NotFound:         http.StatusNotFound,
		protocol.Denied:           http.StatusForbidden,
		protocol.Conflict:         http.StatusConflict,
		protocol.StaleContext:     http.StatusConflict,
		protocol.RateLimited:      http.StatusTooManyRequests,
		protocol.ModelFailure:     http.StatusBadGateway,
		protocol.ServiceFailure:   http.StatusServiceUnavailable,
		protocol.ServiceRestarted: http.StatusServiceUnavailable,
		protocol.AuditUnavailable: http.StatusServiceUnavailable,
		protocol.ReplayGap:        http.StatusConflict,
		protocol.Cancelled:        http.StatusConflict,
		protocol.ProtocolVersion:  http.StatusBadRequest,
		protocol.AccessRevoked:    http.StatusForbidden,
	}
	if len(protocol.ErrorCodes) != 15 || len(want) != 15 {
		t.Fatalf("%d codes listed, want the 14 and access_revoked", len(protocol.ErrorCodes))
	}
	seen := map[protocol.ErrorCode]bool{}
	for _, c := range protocol.ErrorCodes {
		if seen[c] {
			t.Fatalf("code %s listed twice", c)
		}
		seen[c] = true
		w, ok := want[c]
		if !ok {
			t.Fatalf("code %s is not one of the protocol's", c)
		}
		if !c.Valid() || c.HTTPStatus() != w {
			t.Errorf("%s: valid %v, status %d, want %d", c, c.Valid(), c.HTTPStatus(), w)
		}
	}
	if c := protocol.ErrorCode("teapot"); c.Valid() || c.HTTPStatus() != http.StatusInternalServerError {
		t.Fatalf("unknown code: valid %v, status %d", c.Valid(), c.HTTPStatus())
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	// Retryable where a retry can succeed unchanged; conflict and stale
	// context need a refresh first.
	retryable := map[protocol.ErrorCode]bool{protocol.RateLimited: true, protocol.ServiceFailure: true,
		protocol.ServiceRestarted: true, protocol.AuditUnavailable: true}
	for _, c := range protocol.ErrorCodes {
		if e := protocol.Errorf(c, "x %d", 1); e.Retryable != retryable[c] || e.Message != "x 1" || e.Code != c {
			t.Errorf("Errorf(%s) = %+v", c, e)
		}
	}
	base := protocol.Errorf(protocol.Conflict, "busy")
	a := base.With("activeRequestId", "r")
	b := a.With("other", 1)
	if base.Details != nil || len(a.Details) != 1 || len(b.Details) != 2 || a.Details["activeRequestId"] != "r" {
		t.Fatalf("With shares or loses details: %v %v %v", base.Details, a.Details, b.Details)
	}

	wrapped := fmt.Errorf("submit: %w", a)
	if !protocol.IsCode(wrapped, protocol.Conflict) || protocol.CodeOf(wrapped) != protocol.Conflict || protocol.ErrorOf(wrapped) != a {
		t.Fatal("wrapped protocol errors lose their code")
	}
	plain := errors.New("disk on fire at /var/lib/studio")
	pe := protocol.ErrorOf(plain)
	if pe.Code != protocol.ServiceFailure || pe.Message == plain.Error() || !pe.Retryable {
		t.Fatalf("ErrorOf(plain) = %+v: internals must not leak", pe)
	}
	if protocol.CodeOf(plain) != "" || protocol.ErrorOf(nil) != nil {
		t.Fatal("CodeOf/ErrorOf of non-protocol errors")
	}
	if got := a.Error(); got != "conflict: busy" {
		t.Fatalf("Error() = %q", got)
	}

	// The body shape: {"error": ProtocolError}, retryAfterMs and details only when set.
	b1, err := protocol.Marshal(protocol.ErrorBody{Error: protocol.Errorf(protocol.NotFound, "gone")})
	if err != nil || string(b1) != `{"error":{"code":"not_found","message":"gone","retryable":false}}` {
		t.Fatalf("error body = %s, %v", b1, err)
	}
	rl := protocol.Errorf(protocol.RateLimited, "slow")
	rl.RetryAfterMs = 1500
	b2, err := protocol.Marshal(protocol.ErrorBody{Error: rl.With("scope", "provider")})
	if err != nil || string(b2) != `{"error":{"code":"rate_limited","message":"slow","retryable":true,"retryAfterMs":1500,"details":{"scope":"provider"}}}` {
		t.Fatalf("error body = %s, %v", b2, err)
	}
}
