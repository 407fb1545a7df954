package modeltest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// RateLimitNow is the clock's reading when RetryAfterCases are read.
var RateLimitNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// RetryAfterCase is a 429's headers and the wait, in ms, they mean.
type RetryAfterCase struct {
	Name   string
	Header map[string]string
	Want   int64
}

// exerciseErrors: every API's refusals become the same typed errors, and
// no request is retried behind the engine's back. Long as a table is: one
// subtest per refusal, sharing the servers that answer them.
func exerciseErrors(t *testing.T, s Subject) {
	answer := func(status int, header http.Header, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for k, v := range header {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}
	}
	// streamAndCheck are the errors of a stream and of Check.
	streamAndCheck := func(p model.Provider) map[string]error {
		_, err := Collect(context.Background(), p, UserRequest())
		return map[string]error{"stream": err, "check": p.(model.Checker).Check(context.Background())}
	}

	t.Run("RateLimited", func(t *testing.T) {
		t.Parallel()
		f := New(t, answer(http.StatusTooManyRequests, s.RateLimitHeader, s.ErrorBody(http.StatusTooManyRequests, "Rate limit reached; please try again.")))
		evs, err := Collect(context.Background(), s.New(t, f.URL(), f.Client()), UserRequest())
		if pe := WantError(t, err, protocol.RateLimited, true); pe.RetryAfterMs != s.RetryAfter {
			t.Fatalf("RetryAfterMs = %d, want %d", pe.RetryAfterMs, s.RetryAfter)
		}
		if len(evs) != 0 {
			t.Fatalf("events before the error: %+v", evs)
		}
		if n := len(f.Requests()); n != 1 {
			t.Fatalf("the SDK retried: %d requests", n)
		}
	})
	t.Run("RetryAfterHeaders", func(t *testing.T) {
		t.Parallel()
		now := RateLimitNow
		cases := append([]RetryAfterCase{
			{"none", nil, 0},
			{"ms", map[string]string{"retry-after-ms": "800"}, 800},
			{"ms fraction", map[string]string{"retry-after-ms": "250.2"}, 251},
			{"ms wins", map[string]string{"retry-after-ms": "250", "retry-after": "9"}, 250},
			{"seconds", map[string]string{"retry-after": "7"}, 7000},
			{"fractional seconds", map[string]string{"retry-after": "1.5"}, 1500},
			{"date", map[string]string{"retry-after": now.Add(5 * time.Second).Format(http.TimeFormat)}, 5000},
			{"past date", map[string]string{"retry-after": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
			{"garbage", map[string]string{"retry-after": "soon"}, 0},
		}, s.RetryAfterCases...)
		for _, c := range cases {
			h := http.Header{}
			for k, v := range c.Header {
				h.Set(k, v)
			}
			if got := s.RetryAfterMs(h, now); got != c.Want {
				t.Errorf("%s: retryAfterMs = %d, want %d", c.Name, got, c.Want)
			}
		}
	})
	t.Run("RetryAfterDate", func(t *testing.T) {
		t.Parallel()
		now := RateLimitNow
		f := New(t, answer(http.StatusTooManyRequests, http.Header{"Retry-After": {now.Add(4 * time.Second).Format(http.TimeFormat)}}, ""))
		p := s.New(t, f.URL(), f.Client())
		s.SetClock(p, func() time.Time { return now })
		_, err := Collect(context.Background(), p, UserRequest())
		if pe := WantError(t, err, protocol.RateLimited, true); pe.RetryAfterMs != 4000 {
			t.Fatalf("RetryAfterMs = %d, want 4000", pe.RetryAfterMs)
		}
	})
	t.Run("ServerErrors", func(t *testing.T) {
		t.Parallel()
		bodies := map[string]struct {
			status int
			body   string
		}{
			"502 plain text": {502, "upstream connect error or disconnect/reset before headers"},
		}
		for _, status := range []int{500, 502, 503, 529} {
			bodies[fmt.Sprint(status)] = struct {
				status int
				body   string
			}{status, s.ErrorBody(status, "The server had an error while processing your request.")}
		}
		for name, c := range bodies {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f := New(t, answer(c.status, nil, c.body))
				_, err := Collect(context.Background(), s.New(t, f.URL(), f.Client()), UserRequest())
				if pe := WantError(t, err, protocol.ModelFailure, true); pe.Details["httpStatus"] != c.status {
					t.Fatalf("details = %v", pe.Details)
				}
				if n := len(f.Requests()); n != 1 {
					t.Fatalf("the SDK retried: %d requests", n)
				}
			})
		}
	})
	t.Run("BadKey", func(t *testing.T) {
		t.Parallel()
		f := New(t, func(w http.ResponseWriter, r *http.Request) {
			// The fake echoes whatever credential it got, to prove none leaks.
			got := r.Header.Get("X-Api-Key") + r.Header.Get("Authorization")
			answer(http.StatusUnauthorized, nil, s.ErrorBody(http.StatusUnauthorized, "Incorrect API key provided: "+got))(w, r)
		})
		for name, err := range streamAndCheck(s.New(t, f.URL(), f.Client())) {
			pe := WantError(t, err, protocol.ModelFailure, false)
			for _, env := range s.KeyEnv {
				if !strings.Contains(pe.Message, env) {
					t.Errorf("%s: message does not name %s: %q", name, env, pe.Message)
				}
			}
			for _, text := range []string{pe.Message, err.Error(), fmt.Sprintf("%+v", pe), fmt.Sprint(pe.Details)} {
				if strings.Contains(text, s.Key) || strings.Contains(text, s.Key[len(s.Key)-8:]) {
					t.Errorf("%s: error leaks the key: %q", name, text)
				}
			}
		}
	})
	t.Run("BadModel", func(t *testing.T) {
		t.Parallel()
		f := New(t, answer(http.StatusNotFound, nil, s.ErrorBody(http.StatusNotFound, "The model `"+s.Model+"` does not exist.")))
		for name, err := range streamAndCheck(s.New(t, f.URL(), f.Client())) {
			pe := WantError(t, err, protocol.ModelFailure, false)
			if !strings.Contains(pe.Message, "STUDIO_MODEL_NAME") || !strings.Contains(pe.Message, s.Model) {
				t.Fatalf("%s: message = %q", name, pe.Message)
			}
			if !strings.Contains(pe.Message, "does not exist") {
				t.Fatalf("%s: message lost the server's explanation: %q", name, pe.Message)
			}
		}
	})
	t.Run("Check", func(t *testing.T) {
		t.Parallel()
		f := New(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || r.URL.Path != s.CheckPath {
				http.NotFound(w, r)
				return
			}
			answer(http.StatusOK, nil, s.CheckBody)(w, r)
		})
		p := s.New(t, f.URL(), f.Client())
		if err := p.(model.Checker).Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		if p.Name() != s.Name {
			t.Fatalf("Name = %q, want %q", p.Name(), s.Name)
		}
	})
	t.Run("ErrorEventMidStream", func(t *testing.T) {
		t.Parallel()
		f := New(t, Stream(s.Path, s.Header, append(s.Open("Three"), s.ErrorEvent)...))
		evs, err := Collect(context.Background(), s.New(t, f.URL(), f.Client()), UserRequest())
		pe := WantError(t, err, protocol.ModelFailure, true)
		if !strings.Contains(pe.Message, s.ErrorMessage) {
			t.Fatalf("message = %q, want it to say %q", pe.Message, s.ErrorMessage)
		}
		for k, v := range s.ErrorDetails {
			if pe.Details[k] != v {
				t.Fatalf("details = %v, want %s = %v", pe.Details, k, v)
			}
		}
		if Text(evs) != "Three" {
			t.Fatalf("events = %+v", evs)
		}
	})
}
