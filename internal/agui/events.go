package agui

import (
	"encoding/json"
	"strconv"
)

// EventType is an AG-UI event's discriminant.
type EventType string

// The AG-UI events this door sends.
const (
	RunStarted         EventType = "RUN_STARTED"
	RunFinished        EventType = "RUN_FINISHED"
	RunError           EventType = "RUN_ERROR"
	StepStarted        EventType = "STEP_STARTED"
	StepFinished       EventType = "STEP_FINISHED"
	TextMessageStart   EventType = "TEXT_MESSAGE_START"
	TextMessageContent EventType = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd     EventType = "TEXT_MESSAGE_END"
	ToolCallStart      EventType = "TOOL_CALL_START"
	ToolCallArgs       EventType = "TOOL_CALL_ARGS"
	ToolCallEnd        EventType = "TOOL_CALL_END"
	ToolCallResult     EventType = "TOOL_CALL_RESULT"
	MessagesSnapshot   EventType = "MESSAGES_SNAPSHOT"
	ActivitySnapshot   EventType = "ACTIVITY_SNAPSHOT"
)

// Event is one AG-UI event: its type and its members. Seq, when not 0, is
// the frame whose events end with this one: the SSE id a client
// reconnects after.
type Event struct {
	Type   EventType
	Fields map[string]any
	Seq    int64
}

// MarshalJSON writes the event as AG-UI's JSON: type beside its members.
func (e Event) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(e.Fields)+1)
	for k, v := range e.Fields {
		m[k] = v
	}
	m["type"] = string(e.Type)
	return json.Marshal(m)
}

func ev(t EventType, kv ...any) Event {
	f := make(map[string]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		f[kv[i].(string)] = kv[i+1]
	}
	return Event{Type: t, Fields: f}
}

// AppendSSE appends one event as a Server-Sent Event; its id is the frame
// sequence when the event ends a frame's events.
func AppendSSE(dst []byte, e Event) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return dst, err
	}
	if e.Seq > 0 {
		dst = append(dst, "id: "...)
		dst = strconv.AppendInt(dst, e.Seq, 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n'), nil
}

// Interrupt is an open interrupt of RUN_FINISHED's interrupt outcome: a
// proposal waiting for a human.
type Interrupt struct {
	ID             string         `json:"id"`
	Reason         string         `json:"reason"`
	Message        string         `json:"message,omitempty"`
	ToolCallID     string         `json:"toolCallId,omitempty"`
	ResponseSchema map[string]any `json:"responseSchema,omitempty"`
	ExpiresAt      string         `json:"expiresAt,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
}

// ReasonConfirmation is the reason of a proposal's interrupt.
const ReasonConfirmation = "studio.confirmation_required"

// decisionSchema is the JSON Schema of a resolved interrupt's payload.
var decisionSchema = map[string]any{
	"type":     "object",
	"required": []string{"decision"},
	"properties": map[string]any{
		"decision":              map[string]any{"type": "string", "enum": []string{DecideConfirm, DecideDeny}},
		"expectedCommandHash":   map[string]any{"type": "string"},
		"expectedTargetVersion": map[string]any{"type": "string"},
	},
}
