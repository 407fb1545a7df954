package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// fakeConversations knows one conversation, the owner's: enough for the
// policy gate to let the owner's token through to the handler. Every
// other method is the nil interface's (a call panics: the test did not
// expect it).
type fakeConversations struct{ httpapi.Conversations }

func (fakeConversations) PolicyResource(_ context.Context, id string) (policy.Conversation, error) {
	return policy.Conversation{ID: id, Owner: "admin", Visibility: protocol.VisibilityPrivate}, nil
}

// failingEffects answers every read with err.
type failingEffects struct {
	httpapi.Effects
	err error
}

func (f failingEffects) EffectState(context.Context, string, string) (protocol.EffectState, error) {
	return protocol.EffectState{}, f.err
}

// The error mapping is an HTTP concern alone, so it is tested against
// small fakes, not the engine: an engine error that carries no protocol
// code is the typed service_failure, its text (which may hold a DSN or a
// path) never reaches the client; a typed one keeps its code and status.
func TestEngineErrorsAreTypedWithoutTheirText(t *testing.T) {
	const secret = "postgres://studio:hunter2@db/studio"
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   protocol.ErrorCode
	}{
		{"untyped", errors.New("read effect: dial " + secret), http.StatusServiceUnavailable, protocol.ServiceFailure},
		{"typed", protocol.Errorf(protocol.NotFound, "effect not found"), http.StatusNotFound, protocol.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := httpapi.New(httpapi.Config{Token: testToken, Logger: quietLogger(),
				Conversations: fakeConversations{}, Effects: failingEffects{err: tc.err}})
			srv := httptest.NewServer(api)
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL+"/api/operator/conversations/c1/effects/e1", nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error protocol.Error `json:"error"`
			}
			raw := new(strings.Builder)
			if err := json.NewDecoder(io.TeeReader(resp.Body, raw)).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || body.Error.Code != tc.code {
				t.Fatalf("got %d %q, want %d %q: %s", resp.StatusCode, body.Error.Code, tc.status, tc.code, raw)
			}
			if strings.Contains(raw.String(), "hunter2") {
				t.Fatalf("the engine's error text reached the client: %s", raw)
			}
		})
	}
}
