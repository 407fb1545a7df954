package protocol

import (
	"fmt"
	"math"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Version is the only frame envelope version this build speaks.
const Version = 1

// FrameType is the envelope discriminant (docs/protocol.md §3).
type FrameType string

// The eight frame types.
const (
	FrameText         FrameType = "text"
	FrameToolCall     FrameType = "tool_call"
	FrameToolResult   FrameType = "tool_result"
	FrameUICommand    FrameType = "ui_command"
	FrameProposal     FrameType = "proposal"
	FrameConfirmation FrameType = "confirmation"
	FrameError        FrameType = "error"
	FrameDone         FrameType = "done"
)

// Payload is implemented by the eight payload types; each names its frame type.
type Payload interface {
	FrameType() FrameType
	validate() error
}

// Frame is the version-1 envelope. Payload holds the concrete payload value
// (TextPayload, ToolCallPayload, ...) that matches Type.
type Frame struct {
	Version        int       `json:"version"`
	ConversationID string    `json:"conversationId"`
	RequestID      string    `json:"requestId"`
	Sequence       int64     `json:"sequence"`
	Type           FrameType `json:"type"`
	Payload        Payload   `json:"payload"`
	CreatedAt      float64   `json:"createdAt"`
}

// Text roles: the user's instruction is the turn's first text frame
// (docs/design.md §4); model output is the assistant's.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// TextPayload carries user or model text. Concatenation in sequence order is
// the message; frame boundaries carry no meaning.
type TextPayload struct {
	Content string `json:"content"`
	Format  string `json:"format"` // plain | markdown
	Role    string `json:"role,omitempty"`
}

// ToolCallPayload announces a read or draft tool call the model made.
type ToolCallPayload struct {
	CallID    string         `json:"callId"`
	Tool      string         `json:"tool"`
	Arguments jsontext.Value `json:"arguments"`
	Mode      string         `json:"mode"` // read | draft
}

// ToolResultPayload is the outcome of one tool call.
type ToolResultPayload struct {
	CallID string         `json:"callId"`
	OK     bool           `json:"ok"`
	Result jsontext.Value `json:"result,omitzero"` // omitzero: [] and {} are results, not absence
	Error  *Error         `json:"error,omitempty"`
}

// UICommandPayload carries one declarative effect (docs/design.md §4 decision: the
// effect id and expiry travel with it so the client can acknowledge it).
type UICommandPayload struct {
	EffectID  string  `json:"effectId"`
	Effect    Effect  `json:"effect"`
	ExpiresAt float64 `json:"expiresAt"`
}

// ProposalPayload carries one command proposal awaiting a human.
type ProposalPayload struct {
	Proposal CommandProposal `json:"proposal"`
}

// ConfirmationState is a confirmation frame's state.
type ConfirmationState string

// Confirmation states: the contract's four plus denied, failed and amended
// (docs/design.md §4).
const (
	ConfirmationRequired  ConfirmationState = "required"
	ConfirmationConfirmed ConfirmationState = "confirmed"
	ConfirmationExpired   ConfirmationState = "expired"
	ConfirmationExecuted  ConfirmationState = "executed"
	ConfirmationDenied    ConfirmationState = "denied"
	ConfirmationFailed    ConfirmationState = "failed"
	// ConfirmationAmended: the operator replaced the proposal with an
	// amended one; nothing of it ran.
	ConfirmationAmended ConfirmationState = "amended"
)

// ReasonAmended is the error code stored with a proposal cancelled because
// the operator amended it.
const ReasonAmended = "amended"

// ConfirmationPayload reports a proposal's confirmation state.
type ConfirmationPayload struct {
	ProposalID string            `json:"proposalId"`
	State      ConfirmationState `json:"state"`
	// DecidedBy names the principal that confirmed or denied the proposal
	// (an extension of the contract's payload; absent for a required, expired or
	// executed state, and when no principal decided).
	DecidedBy string `json:"decidedBy,omitempty"`
}

// ErrorPayload reports a typed turn-level failure.
type ErrorPayload struct {
	Error Error `json:"error"`
}

// Outcome is how a request ended: a done frame's outcome.
type Outcome string

// Done outcomes.
const (
	OutcomeCompleted Outcome = "completed"
	OutcomeFailed    Outcome = "failed"
	OutcomeCancelled Outcome = "cancelled"
)

// DonePayload ends every accepted request exactly once. LastSequence is the
// sequence of this done frame, the request's last frame.
type DonePayload struct {
	Outcome      Outcome `json:"outcome"`
	LastSequence int64   `json:"lastSequence"`
}

func (TextPayload) FrameType() FrameType         { return FrameText }
func (ToolCallPayload) FrameType() FrameType     { return FrameToolCall }
func (ToolResultPayload) FrameType() FrameType   { return FrameToolResult }
func (UICommandPayload) FrameType() FrameType    { return FrameUICommand }
func (ProposalPayload) FrameType() FrameType     { return FrameProposal }
func (ConfirmationPayload) FrameType() FrameType { return FrameConfirmation }
func (ErrorPayload) FrameType() FrameType        { return FrameError }
func (DonePayload) FrameType() FrameType         { return FrameDone }

func (p TextPayload) validate() error {
	if p.Format != "plain" && p.Format != "markdown" {
		return fmt.Errorf("text format %q is not plain or markdown", p.Format)
	}
	if p.Role != "" && p.Role != RoleUser && p.Role != RoleAssistant {
		return fmt.Errorf("text role %q is not user or assistant", p.Role)
	}
	return nil
}

func (p ToolCallPayload) validate() error {
	if p.CallID == "" || p.Tool == "" {
		return fmt.Errorf("tool_call needs callId and tool")
	}
	if p.Mode != "read" && p.Mode != "draft" {
		return fmt.Errorf("tool_call mode %q is not read or draft", p.Mode)
	}
	if p.Arguments.Kind() != '{' {
		return fmt.Errorf("tool_call arguments must be an object")
	}
	return nil
}

func (p ToolResultPayload) validate() error {
	if p.CallID == "" {
		return fmt.Errorf("tool_result needs callId")
	}
	if !p.OK && p.Error == nil {
		return fmt.Errorf("failed tool_result needs an error")
	}
	if p.Error != nil && !p.Error.Code.Valid() {
		return fmt.Errorf("tool_result error code %q is unknown", p.Error.Code)
	}
	return nil
}

func (p UICommandPayload) validate() error {
	if p.EffectID == "" {
		return fmt.Errorf("ui_command needs effectId")
	}
	return p.Effect.Validate()
}

func (p ProposalPayload) validate() error { return p.Proposal.validate() }

func (p ConfirmationPayload) validate() error {
	switch p.State {
	case ConfirmationRequired, ConfirmationConfirmed, ConfirmationExpired,
		ConfirmationExecuted, ConfirmationDenied, ConfirmationFailed, ConfirmationAmended:
	default:
		return fmt.Errorf("confirmation state %q is unknown", p.State)
	}
	if p.ProposalID == "" {
		return fmt.Errorf("confirmation needs proposalId")
	}
	return nil
}

func (p ErrorPayload) validate() error {
	if !p.Error.Code.Valid() {
		return fmt.Errorf("error code %q is unknown", p.Error.Code)
	}
	return nil
}

func (p DonePayload) validate() error {
	switch p.Outcome {
	case OutcomeCompleted, OutcomeFailed, OutcomeCancelled:
	default:
		return fmt.Errorf("done outcome %q is unknown", p.Outcome)
	}
	if p.LastSequence < 1 {
		return fmt.Errorf("done lastSequence must be at least 1")
	}
	return nil
}

// newPayload returns a pointer to an empty payload of the given type.
func newPayload(t FrameType) (Payload, bool) {
	switch t {
	case FrameText:
		return &TextPayload{}, true
	case FrameToolCall:
		return &ToolCallPayload{}, true
	case FrameToolResult:
		return &ToolResultPayload{}, true
	case FrameUICommand:
		return &UICommandPayload{}, true
	case FrameProposal:
		return &ProposalPayload{}, true
	case FrameConfirmation:
		return &ConfirmationPayload{}, true
	case FrameError:
		return &ErrorPayload{}, true
	case FrameDone:
		return &DonePayload{}, true
	}
	return nil, false
}

// ValidFrameType reports whether t is one of the eight frame types.
func ValidFrameType(t FrameType) bool { _, ok := newPayload(t); return ok }

// Validate checks an envelope before it is stored or written to a stream.
func (f *Frame) Validate() error {
	if f.Version != Version {
		return Errorf(ProtocolVersion, "frame version %d is not supported", f.Version)
	}
	if f.Payload == nil {
		return Errorf(Validation, "frame has no payload")
	}
	if f.Payload.FrameType() != f.Type {
		return Errorf(Validation, "frame type %q does not match its %q payload", f.Type, f.Payload.FrameType())
	}
	if f.Sequence < 1 {
		return Errorf(Validation, "frame sequence must be at least 1")
	}
	if err := f.Payload.validate(); err != nil {
		return Errorf(Validation, "%v", err)
	}
	return nil
}

// EncodePayload is the stored and wire form of one payload.
func EncodePayload(p Payload) (jsontext.Value, error) {
	if err := p.validate(); err != nil {
		return nil, Errorf(Validation, "%v", err)
	}
	b, err := json.Marshal(p, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", p.FrameType(), err)
	}
	return b, nil
}

// DecodePayload strictly decodes a payload of frame type t.
func DecodePayload(t FrameType, data []byte) (Payload, error) {
	p, ok := newPayload(t)
	if !ok {
		return nil, Errorf(Validation, "unknown frame type %q", t)
	}
	if err := Unmarshal(data, p); err != nil {
		return nil, err
	}
	// Store the value, not the pointer, so type switches see one form.
	v := deref(p)
	if err := v.validate(); err != nil {
		return nil, Errorf(Validation, "%v", err)
	}
	return v, nil
}

func deref(p Payload) Payload {
	switch v := p.(type) {
	case *TextPayload:
		return *v
	case *ToolCallPayload:
		return *v
	case *ToolResultPayload:
		return *v
	case *UICommandPayload:
		return *v
	case *ProposalPayload:
		return *v
	case *ConfirmationPayload:
		return *v
	case *ErrorPayload:
		return *v
	case *DonePayload:
		return *v
	}
	return p
}

// DecodeFrame strictly decodes one frame: unknown members, duplicate names,
// wrong types, an unknown version or frame type are errors, never best-effort.
func DecodeFrame(data []byte) (Frame, error) {
	var w RawFrame
	if err := Unmarshal(data, &w); err != nil {
		// A frame of another version may well have members this one lacks:
		// report the version, not the members.
		var v struct {
			Version *int `json:"version"`
		}
		if json.Unmarshal(data, &v) == nil && v.Version != nil && *v.Version != Version {
			return Frame{}, Errorf(ProtocolVersion, "frame version %d is not supported", *v.Version)
		}
		return Frame{}, err
	}
	if w.Version != Version {
		return Frame{}, Errorf(ProtocolVersion, "frame version %d is not supported", w.Version)
	}
	if !ValidFrameType(w.Type) {
		return Frame{}, Errorf(Validation, "unknown frame type %q", w.Type)
	}
	if w.Payload == nil {
		return Frame{}, Errorf(Validation, "frame has no payload")
	}
	p, err := DecodePayload(w.Type, w.Payload)
	if err != nil {
		return Frame{}, err
	}
	f := Frame{Version: w.Version, ConversationID: w.ConversationID, RequestID: w.RequestID,
		Sequence: w.Sequence, Type: w.Type, Payload: p, CreatedAt: w.CreatedAt}
	if err := f.Validate(); err != nil {
		return Frame{}, err
	}
	return f, nil
}

// EncodeFrame validates and encodes one frame for the wire.
func EncodeFrame(f Frame) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(f, json.Deterministic(true))
}

// Timestamp is the wire form of a time: Unix seconds as a float, to the microsecond.
func Timestamp(t time.Time) float64 {
	return math.Round(float64(t.UnixMicro())) / 1e6
}

// Time converts a wire timestamp back to a time.
func Time(ts float64) time.Time {
	return time.UnixMicro(int64(math.Round(ts * 1e6))).UTC()
}

// RawFrame is the envelope with the payload kept as raw JSON: what the store
// holds and the stream writes, and what DecodeFrame reads first.
type RawFrame struct {
	Version        int            `json:"version"`
	ConversationID string         `json:"conversationId"`
	RequestID      string         `json:"requestId"`
	Sequence       int64          `json:"sequence"`
	Type           FrameType      `json:"type"`
	Payload        jsontext.Value `json:"payload"`
	CreatedAt      float64        `json:"createdAt"`
}
