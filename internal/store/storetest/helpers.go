package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// fixture is one subtest's fresh store and clock.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	s     store.Store
	clock *Clock
}

func newFixture(t *testing.T, open func(t *testing.T) store.Store) *fixture {
	t.Helper()
	return &fixture{t: t, ctx: t.Context(), s: open(t), clock: NewClock(Epoch)}
}

// tick advances the clock by a second and returns the new time, so every
// write of a subtest gets a distinct, predictable timestamp.
func (f *fixture) tick() time.Time { return f.clock.Advance(time.Second) }

func newID() string { return uuid.NewString() }

func ptr[T any](v T) *T { return &v }

// sampleContext is a context snapshot as a coordinator would store it.
var sampleContext = jsontext.Value(`{"space":"mission","route":"/","filters":{"status":"failed"}}`)

const sampleContextHash = "5d2a0c7e3f0e2b5d3a1e9c0b8f7a6d5e4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a99"

func (f *fixture) conversation() store.Conversation {
	f.t.Helper()
	c, err := f.s.CreateConversation(f.ctx, store.CreateConversationParams{
		ID: newID(), Project: ptr("studio"), Title: ptr("triage"), Now: f.tick(),
	})
	if err != nil {
		f.t.Fatalf("CreateConversation: %v", err)
	}
	return c
}

func (f *fixture) get(id string) store.Conversation {
	f.t.Helper()
	c, err := f.s.GetConversation(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetConversation(%s): %v", id, err)
	}
	return c
}

func (f *fixture) turn(requestID string) store.Turn {
	f.t.Helper()
	tr, err := f.s.GetTurn(f.ctx, requestID)
	if err != nil {
		f.t.Fatalf("GetTurn(%s): %v", requestID, err)
	}
	return tr
}

func (f *fixture) submitParams(convID string, expected int64) store.SubmitTurnParams {
	return store.SubmitTurnParams{
		ConversationID: convID, RequestID: newID(), Instruction: "show failed runs",
		ContextJSON: sampleContext, ContextHash: sampleContextHash,
		ExpectedLastSequence: expected, Now: f.tick(),
	}
}

// submit submits a turn at the conversation's current last sequence.
func (f *fixture) submit(convID string) (store.Turn, store.Frame) {
	f.t.Helper()
	tr, fr, err := f.s.SubmitTurn(f.ctx, f.submitParams(convID, f.get(convID).LastSequence()))
	if err != nil {
		f.t.Fatalf("SubmitTurn: %v", err)
	}
	return tr, fr
}

// running returns a new conversation with a running turn.
func (f *fixture) running() (store.Conversation, store.Turn) {
	f.t.Helper()
	c := f.conversation()
	tr, _ := f.submit(c.ID)
	tr, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("StartTurn: %v", err)
	}
	return f.get(c.ID), tr
}

func (f *fixture) finish(requestID string, status store.TurnStatus, perr *protocol.Error) []store.Frame {
	f.t.Helper()
	_, frames, err := f.s.FinishTurn(f.ctx, store.FinishTurnParams{RequestID: requestID, Status: status, Error: perr, Now: f.tick()})
	if err != nil {
		f.t.Fatalf("FinishTurn: %v", err)
	}
	return frames
}

func (f *fixture) append(convID, requestID string, payloads ...protocol.Payload) []store.Frame {
	f.t.Helper()
	frames, err := f.s.AppendFrames(f.ctx, appendParams(convID, requestID, f.tick(), payloads...))
	if err != nil {
		f.t.Fatalf("AppendFrames: %v", err)
	}
	return frames
}

func appendParams(convID, requestID string, now time.Time, payloads ...protocol.Payload) store.AppendFramesParams {
	p := store.AppendFramesParams{ConversationID: convID, RequestID: requestID, Now: now}
	for _, pl := range payloads {
		p.Frames = append(p.Frames, store.NewFrame{Payload: pl})
	}
	return p
}

// frames lists every frame of a conversation, paging as a stream would.
func (f *fixture) frames(convID string) []store.Frame {
	f.t.Helper()
	var all []store.Frame
	var after int64
	for {
		page, err := f.s.ListFrames(f.ctx, store.ListFramesParams{ConversationID: convID, AfterSequence: after, Limit: 100})
		if err != nil {
			f.t.Fatalf("ListFrames: %v", err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].Sequence
	}
}

func text(s string) protocol.TextPayload {
	return protocol.TextPayload{Content: s, Format: "markdown", Role: protocol.RoleAssistant}
}

// wantCode fails unless err carries the protocol code want.
func wantCode(t *testing.T, err error, want protocol.ErrorCode) *protocol.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %s", want)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != want {
		t.Fatalf("err = %v, want code %s", err, want)
	}
	return pe
}

// detailInt reads an integer detail whatever numeric type a backend put there.
func detailInt(t *testing.T, pe *protocol.Error, key string) int64 {
	t.Helper()
	switch v := pe.Details[key].(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case float64:
		return int64(v)
	}
	t.Fatalf("details[%q] = %#v (%T), want an integer", key, pe.Details[key], pe.Details[key])
	return 0
}

// jsonEqual compares JSON by canonical form: a backend may reformat stored
// JSON (PostgreSQL jsonb does).
func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	g, err := protocol.Canonicalize(got)
	if err != nil {
		t.Fatalf("stored JSON %q: %v", got, err)
	}
	w, err := protocol.Canonicalize(want)
	if err != nil {
		t.Fatalf("expected JSON %q: %v", want, err)
	}
	return bytes.Equal(g, w)
}

// payloadOf decodes a stored frame's payload.
func payloadOf(t *testing.T, fr store.Frame) protocol.Payload {
	t.Helper()
	p, err := protocol.DecodePayload(fr.Type, fr.Payload)
	if err != nil {
		t.Fatalf("frame %d: stored %s payload %s does not decode: %v", fr.Sequence, fr.Type, fr.Payload, err)
	}
	return p
}

// wantDone checks that fr is a done frame with outcome whose lastSequence is
// its own sequence.
func wantDone(t *testing.T, fr store.Frame, outcome protocol.Outcome) {
	t.Helper()
	d, ok := payloadOf(t, fr).(protocol.DonePayload)
	if !ok {
		t.Fatalf("frame %d is %s, want done", fr.Sequence, fr.Type)
	}
	if d.Outcome != outcome || d.LastSequence != fr.Sequence {
		t.Fatalf("done = %+v at sequence %d, want outcome %s and lastSequence %d", d, fr.Sequence, outcome, fr.Sequence)
	}
}

// wantError checks that fr is an error frame with code.
func wantError(t *testing.T, fr store.Frame, code protocol.ErrorCode) {
	t.Helper()
	e, ok := payloadOf(t, fr).(protocol.ErrorPayload)
	if !ok {
		t.Fatalf("frame %d is %s, want error", fr.Sequence, fr.Type)
	}
	if e.Error.Code != code {
		t.Fatalf("error frame code = %s, want %s", e.Error.Code, code)
	}
}

// wantSequences checks that frames are numbered from..from+len-1 in order.
func wantSequences(t *testing.T, frames []store.Frame, from int64) {
	t.Helper()
	for i, fr := range frames {
		if fr.Sequence != from+int64(i) {
			t.Fatalf("frame %d has sequence %d, want %d", i, fr.Sequence, from+int64(i))
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitClosed waits until ch is closed. A backend may wake asynchronously
// (LISTEN/NOTIFY), so this waits; the deadline only stops a hung test and is
// no assertion about time.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("%s: frame signal never closed", what)
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// subtests returns the suite's way of registering a subtest: parallel, with
// its own fixture (a fresh store and clock).
func subtests(t *testing.T, open func(t *testing.T) store.Store) func(name string, fn func(t *testing.T, f *fixture)) {
	return func(name string, fn func(t *testing.T, f *fixture)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newFixture(t, open))
		})
	}
}

// ActiveTurn is a conversation with a submitted turn that may append.
type ActiveTurn struct{ ConversationID, RequestID string }

// ActiveTurns creates n conversations, each with a submitted turn, for
// tests and benchmarks that append frames without running a model.
func ActiveTurns(tb testing.TB, s store.Store, n int, now time.Time) []ActiveTurn {
	tb.Helper()
	out := make([]ActiveTurn, n)
	for i := range out {
		c, err := s.CreateConversation(tb.Context(), store.CreateConversationParams{ID: newID(), Now: now})
		if err != nil {
			tb.Fatal(err)
		}
		rid := newID()
		if _, _, err := s.SubmitTurn(tb.Context(), store.SubmitTurnParams{ConversationID: c.ID, RequestID: rid, Instruction: "x",
			ContextJSON: []byte(`{}`), ContextHash: "h", Now: now, Instance: "storetest"}); err != nil {
			tb.Fatal(err)
		}
		out[i] = ActiveTurn{c.ID, rid}
	}
	return out
}
