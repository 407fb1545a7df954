package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
)

// RunAgentInput is the body of POST /api/agui: AG-UI's RunAgentInput.
// Members this door does not read (protocolVersion, parentRunId, state)
// are accepted and ignored, as AG-UI clients send them.
type RunAgentInput struct {
	ThreadID       string          `json:"threadId"`
	RunID          string          `json:"runId"`
	Messages       []Message       `json:"messages"`
	Tools          []Tool          `json:"tools"`
	Context        []ContextItem   `json:"context"`
	State          json.RawMessage `json:"state,omitempty"`
	ForwardedProps json.RawMessage `json:"forwardedProps,omitempty"`
	Resume         []ResumeEntry   `json:"resume,omitempty"`
}

// Message is one AG-UI message of the client's history. Content is a
// string, or (a user message) a list of content parts.
type Message struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// Tool is a frontend tool the client declares: one it runs itself.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ContextItem is one entry of the run's context.
type ContextItem struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResumeEntry answers one open interrupt of the thread.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"` // resolved | cancelled
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// Resume entry statuses.
const (
	ResumeResolved  = "resolved"
	ResumeCancelled = "cancelled"
)

// Decision is what a resolved resume entry's payload says of a proposal:
// confirm or deny, with the command hash and target version as shown
// (optional: the interrupt's own when absent).
type Decision struct {
	Decision              string  `json:"decision"`
	ExpectedCommandHash   string  `json:"expectedCommandHash,omitempty"`
	ExpectedTargetVersion *string `json:"expectedTargetVersion,omitempty"`
}

// Decisions a resume entry may carry.
const (
	DecideConfirm = "confirm"
	DecideDeny    = "deny"
)

// Props are the door's own members of forwardedProps, under "studio".
type Props struct {
	// View is the cockpit view the turn is asked from (default: mission).
	View *protocol.ContextSnapshot `json:"view,omitempty"`
	// WhenBusy is the submission's strategy while the thread has an active
	// turn (default reject).
	WhenBusy protocol.WhenBusy `json:"whenBusy,omitempty"`
	// MessagesSnapshot asks for MESSAGES_SNAPSHOT at the run's start.
	MessagesSnapshot bool `json:"messagesSnapshot,omitempty"`
	// Visibility of a thread created by this run: private or team.
	Visibility *string `json:"visibility,omitempty"`
}

// maxBody bounds a request body: AG-UI clients send the thread's whole
// history with every run.
const maxBody = 8 << 20

// maxContext bounds the context entries a run may carry.
const maxContext = 32

// DecodeInput decodes and checks a RunAgentInput; a typed validation error
// names the member at fault.
func DecodeInput(body []byte) (RunAgentInput, Props, error) {
	var in RunAgentInput
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&in); err != nil {
		return in, Props{}, protocol.Errorf(protocol.Validation, "the body is not an AG-UI RunAgentInput: %v", err)
	}
	if dec.More() {
		return in, Props{}, protocol.Errorf(protocol.Validation, "the body holds more than one JSON value")
	}
	invalid := func(field, format string, args ...any) error {
		return protocol.Errorf(protocol.Validation, format, args...).With("field", field)
	}
	switch {
	case strings.TrimSpace(in.ThreadID) == "" || len(in.ThreadID) > 200:
		return in, Props{}, invalid("threadId", "threadId must be 1 to 200 characters")
	case strings.TrimSpace(in.RunID) == "" || len(in.RunID) > 200:
		return in, Props{}, invalid("runId", "runId must be 1 to 200 characters")
	case len(in.Context) > maxContext:
		return in, Props{}, invalid("context", "at most %d context entries are allowed", maxContext)
	}
	for i, m := range in.Messages {
		switch m.Role {
		case "user", "assistant", "system", "developer", "tool", "activity", "reasoning":
		default:
			return in, Props{}, invalid(fmt.Sprintf("messages[%d].role", i), "message role %q is not an AG-UI role", m.Role)
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return in, Props{}, invalid(fmt.Sprintf("messages[%d].toolCallId", i), "a tool message needs toolCallId")
		}
	}
	for i, t := range in.Tools {
		if t.Name == "" {
			return in, Props{}, invalid(fmt.Sprintf("tools[%d].name", i), "a tool needs a name")
		}
	}
	for i, r := range in.Resume {
		if r.InterruptID == "" {
			return in, Props{}, invalid(fmt.Sprintf("resume[%d].interruptId", i), "a resume entry needs interruptId")
		}
		if r.Status != ResumeResolved && r.Status != ResumeCancelled {
			return in, Props{}, invalid(fmt.Sprintf("resume[%d].status", i), "resume status must be resolved or cancelled")
		}
	}
	var props Props
	if len(in.ForwardedProps) > 0 && !bytes.Equal(bytes.TrimSpace(in.ForwardedProps), []byte("null")) {
		var fp struct {
			Studio json.RawMessage `json:"studio"`
		}
		if err := json.Unmarshal(in.ForwardedProps, &fp); err != nil {
			return in, Props{}, invalid("forwardedProps", "forwardedProps must be an object")
		}
		if len(fp.Studio) > 0 {
			d := json.NewDecoder(bytes.NewReader(fp.Studio))
			d.DisallowUnknownFields()
			if err := d.Decode(&props); err != nil {
				return in, Props{}, invalid("forwardedProps.studio", "forwardedProps.studio: %v", err)
			}
		}
	}
	if props.View != nil {
		if err := props.View.Validate(); err != nil {
			return in, Props{}, err
		}
	}
	return in, props, nil
}

// Text is a message's text: its string content, or its text parts
// joined. A part that is not text is refused: the operator reads text.
func (m Message) Text() (string, error) {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || c[0] == 'n' {
		return "", nil
	}
	if c[0] == '"' {
		var s string
		err := json.Unmarshal(c, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return "", protocol.Errorf(protocol.Validation, "message %s content is neither a string nor content parts", m.ID)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", protocol.Errorf(protocol.Validation, "message %s has a %q part; Studio's operator reads text parts only", m.ID, p.Type).
				With("field", "messages.content")
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// threadNamespace names the conversations of AG-UI threads whose id is
// not a UUID.
var threadNamespace = uuid.MustParse("6f1c2f4e-3b0a-5d3e-9a43-6a2f1f0c7a11")

// ConversationID is the conversation of an AG-UI thread: the thread id
// itself when it is a UUID (so a client may continue a cockpit
// conversation), else a UUID derived from it.
func ConversationID(threadID string) string {
	if id, err := uuid.Parse(threadID); err == nil {
		return id.String()
	}
	return uuid.NewSHA1(threadNamespace, []byte(threadID)).String()
}

// RequestID is the turn a run submits: derived from the thread's
// conversation and the run id, so a run sent again finds its turn.
func RequestID(convID, runID string) string {
	return uuid.NewSHA1(uuid.MustParse(convID), []byte(runID)).String()
}
