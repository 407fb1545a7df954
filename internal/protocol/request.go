package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// MaxInstructionChars bounds a turn instruction (docs/design.md §5).
const MaxInstructionChars = 32_768

// ContextSnapshot is the cockpit view the operator was looking at when the turn
// was submitted (docs/design.md §5).
type ContextSnapshot struct {
	Project   *string           `json:"project,omitempty"`
	Space     string            `json:"space"`
	Route     string            `json:"route"`
	Selection map[string]string `json:"selection,omitempty"`
	Filters   map[string]any    `json:"filters,omitempty"`
}

// Validate checks the snapshot's shape; route-level checks are the routes
// package's.
func (c ContextSnapshot) Validate() error {
	if !slices.Contains(Spaces, c.Space) {
		return Errorf(Validation, "context space %q is not one of the six spaces", c.Space).With("field", "context.space")
	}
	if c.Route == "" {
		return Errorf(Validation, "context route is required").With("field", "context.route")
	}
	if len(c.Route) > 2048 {
		return Errorf(Validation, "context route is too long").With("field", "context.route")
	}
	return nil
}

// TurnRequest is the body of POST .../turns.
type TurnRequest struct {
	Instruction          string          `json:"instruction"`
	Context              ContextSnapshot `json:"context"`
	ExpectedLastSequence *int64          `json:"expectedLastSequence"`
	// Client is what kind of client submits the turn (absent: the cockpit).
	Client ClientKind `json:"client,omitzero"`
	// WhenBusy says what a submission does while the conversation has an
	// active turn (docs/protocol.md §4): reject (the default: conflict),
	// enqueue (wait behind it) or interrupt (cancel it, then run).
	WhenBusy WhenBusy `json:"whenBusy,omitzero"`
}

// WhenBusy is a submission's strategy for a conversation whose turn is
// still active ("double-texting").
type WhenBusy string

// The strategies.
const (
	// WhenBusyReject refuses the submission with conflict (the default).
	WhenBusyReject WhenBusy = "reject"
	// WhenBusyEnqueue accepts the turn to run after the active one and
	// those already waiting, in order.
	WhenBusyEnqueue WhenBusy = "enqueue"
	// WhenBusyInterrupt cancels the active turn (its frames kept, its
	// pending proposal cancelled) and runs this one next, ahead of those
	// already waiting.
	WhenBusyInterrupt WhenBusy = "interrupt"
)

// WhenBusyValues are the strategies a submission may name.
var WhenBusyValues = []WhenBusy{WhenBusyReject, WhenBusyEnqueue, WhenBusyInterrupt}

// Waits reports whether a submission with this strategy may wait behind
// an active turn (enqueue or interrupt).
func (w WhenBusy) Waits() bool { return w == WhenBusyEnqueue || w == WhenBusyInterrupt }

// MaxWaitingTurns bounds the turns that wait behind a conversation's
// active turn: past it a submission that would wait is refused (conflict,
// details.limit "waitingTurns").
const MaxWaitingTurns = 16

// Validate applies the submission's bounds (docs/design.md §5).
func (r TurnRequest) Validate() error {
	n := utf8.RuneCountInString(r.Instruction)
	if n == 0 || len(bytes.TrimSpace([]byte(r.Instruction))) == 0 {
		return Errorf(Validation, "instruction must not be empty").With("field", "instruction")
	}
	if n > MaxInstructionChars {
		return Errorf(Validation, "instruction is %d characters; at most %d are allowed", n, MaxInstructionChars).With("field", "instruction")
	}
	if r.ExpectedLastSequence == nil {
		return Errorf(Validation, "expectedLastSequence is required").With("field", "expectedLastSequence")
	}
	if *r.ExpectedLastSequence < 0 {
		return Errorf(Validation, "expectedLastSequence must be at least 0").With("field", "expectedLastSequence")
	}
	if !r.Client.Valid() {
		return Errorf(Validation, "client %q is not one of cockpit, cli, mcp, text", r.Client).With("field", "client")
	}
	if r.WhenBusy != "" && !slices.Contains(WhenBusyValues, r.WhenBusy) {
		return Errorf(Validation, "whenBusy must be reject, enqueue or interrupt").With("field", "whenBusy")
	}
	return r.Context.Validate()
}

// TurnAccepted is the 202 answer to a turn submission.
type TurnAccepted struct {
	ConversationID string `json:"conversationId"`
	RequestID      string `json:"requestId"`
	// AcceptedSequence is the sequence of the turn's first frame (its
	// instruction); absent for a turn that waits behind another, whose
	// instruction is stored when its place comes.
	AcceptedSequence int64 `json:"acceptedSequence,omitzero"`
	// Waiting is the turn's place among those waiting behind the active
	// turn (1 is next); absent for a turn that became the active one.
	Waiting int `json:"waiting,omitzero"`
	// Interrupted names the active turn an interrupt asked to cancel.
	Interrupted string `json:"interrupted,omitzero"`
}

// CreateConversationRequest is the body of POST /operator/conversations.
type CreateConversationRequest struct {
	Project *string `json:"project,omitempty"`
	Title   *string `json:"title,omitempty"`
	// Visibility is private or team (omitted: team).
	Visibility *string `json:"visibility,omitempty"`
}

// UpdateConversationRequest is the body of PATCH /operator/conversations/{id}.
type UpdateConversationRequest struct {
	Title  *string `json:"title,omitempty"`
	Status *string `json:"status,omitempty"` // active | archived
	// Pinned pins or unpins; Model chooses the configured model the
	// conversation's next turns use ("" for the daemon's default).
	Pinned *bool   `json:"pinned,omitzero"`
	Model  *string `json:"model,omitzero"` // omitzero: "" is a value
	// Visibility is private or team; only the owner or an admin changes it.
	Visibility *string `json:"visibility,omitempty"`
}

// AckEffectRequest is the body of POST .../effects/{id}/ack (docs/design.md §8).
type AckEffectRequest struct {
	Status        string  `json:"status"` // applied | rejected
	ClientRoute   *string `json:"clientRoute,omitempty"`
	RejectionCode *string `json:"rejectionCode,omitempty"`
	Detail        string  `json:"detail,omitempty"` // diagnostic only
}

// RejectionCodes are the five stable effect rejection codes (docs/design.md §8).
var RejectionCodes = []string{"unsupported", "invalid_params", "stale_context", "not_visible", "client_error"}

// ConfirmProposalRequest is the body of POST .../proposals/{id}/confirm.
// ExpectedTargetVersion is the target's version as shown, in text form; on
// the wire it is an integer like every version, and the contract's string form
// is accepted too.
type ConfirmProposalRequest struct {
	ExpectedCommandHash   string
	ExpectedTargetVersion *string
}

type confirmProposalWire struct {
	ExpectedCommandHash   string         `json:"expectedCommandHash"`
	ExpectedTargetVersion jsontext.Value `json:"expectedTargetVersion,omitzero"`
}

// MarshalJSON writes the expected version as an integer when it is one.
func (r ConfirmProposalRequest) MarshalJSON() ([]byte, error) {
	w := confirmProposalWire{ExpectedCommandHash: r.ExpectedCommandHash}
	if v := r.ExpectedTargetVersion; v != nil {
		b, err := json.Marshal(*v)
		if err != nil {
			return nil, err
		}
		if VersionNumber(*v) {
			b = []byte(*v)
		}
		w.ExpectedTargetVersion = b
	}
	return json.Marshal(w, json.Deterministic(true))
}

// UnmarshalJSON strictly decodes the body; null means no expected version.
func (r *ConfirmProposalRequest) UnmarshalJSON(data []byte) error {
	var w confirmProposalWire
	if err := Unmarshal(data, &w); err != nil {
		return err
	}
	*r = ConfirmProposalRequest{ExpectedCommandHash: w.ExpectedCommandHash}
	if len(w.ExpectedTargetVersion) > 0 && w.ExpectedTargetVersion.Kind() != 'n' {
		v, err := VersionText(w.ExpectedTargetVersion)
		if err != nil {
			return Errorf(Validation, "expectedTargetVersion %v", err).With("field", "expectedTargetVersion")
		}
		r.ExpectedTargetVersion = &v
	}
	return nil
}

// ResultStatus is a proposal result's status: the contract's four, plus
// cancelled (denied, or its turn ended first) and executing (the command is
// running, or its outcome could not be recorded).
type ResultStatus string

// Proposal result statuses (docs/design.md §9).
const (
	ResultSucceeded ResultStatus = "succeeded"
	ResultFailed    ResultStatus = "failed"
	ResultConflict  ResultStatus = "conflict"
	ResultExpired   ResultStatus = "expired"
	ResultCancelled ResultStatus = "cancelled"
	ResultExecuting ResultStatus = "executing"
)

// ProposalResult is the answer to confirm and deny (docs/design.md §9.3).
type ProposalResult struct {
	ProposalID string         `json:"proposalId"`
	Status     ResultStatus   `json:"status"`
	Result     jsontext.Value `json:"result,omitzero"` // omitzero: an empty {} result is still a result
	Error      *Error         `json:"error,omitempty"`
}

// StreamTicketRequest is the body of POST /operator/stream-tickets.
type StreamTicketRequest struct {
	ConversationID string `json:"conversationId"`
	AfterSequence  int64  `json:"afterSequence"`
}

// TicketPrefix starts every stream ticket, as stu_ starts every token
// and whsec_ every webhook signing secret: a secret scanner recognises
// one that leaked (docs/teams.md, Credentials).
const TicketPrefix = "stt_"

// StreamTicket is a one-use stream credential (docs/design.md §12).
type StreamTicket struct {
	Ticket    string  `json:"ticket"`
	ExpiresAt float64 `json:"expiresAt"`
}

// ErrorBody is every HTTP error response: {"error": ProtocolError}.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// snakeAliases are the contract's snake_case spellings that request bodies accept
// beside camelCase (docs/design.md §4). Nothing else is renamed.
var snakeAliases = map[string]string{
	"expected_last_sequence":  "expectedLastSequence",
	"expected_command_hash":   "expectedCommandHash",
	"expected_target_version": "expectedTargetVersion",
	"client_route":            "clientRoute",
	"rejection_code":          "rejectionCode",
}

// DecodeRequest strictly decodes a request body into v. The top-level object
// may spell the contract's fields in snake_case (docs/design.md §4); giving
// both spellings is a duplicate. An optional top-level "version" must be 1.
func DecodeRequest(data []byte, v any) error {
	normalized, err := normalizeBody(data)
	if err != nil {
		return err
	}
	return Unmarshal(normalized, v)
}

func normalizeBody(data []byte) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, Errorf(Validation, "request body is not JSON: %v", cleanErr(err))
	}
	if tok.Kind() != '{' {
		return nil, Errorf(Validation, "request body must be a JSON object")
	}
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out, jsontext.AllowDuplicateNames(true))
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return nil, err
	}
	for dec.PeekKind() != '}' {
		nameTok, err := dec.ReadToken()
		if err != nil {
			return nil, Errorf(Validation, "request body is not valid JSON: %v", cleanErr(err))
		}
		name := nameTok.String()
		val, err := dec.ReadValue()
		if err != nil {
			return nil, Errorf(Validation, "request body is not valid JSON: %v", cleanErr(err))
		}
		if name == "version" {
			var ver int
			if err := json.Unmarshal(val, &ver); err != nil || ver != Version {
				return nil, Errorf(ProtocolVersion, "request version %s is not supported", string(val))
			}
			continue
		}
		if camel, ok := snakeAliases[name]; ok {
			name = camel
		}
		if err := enc.WriteToken(jsontext.String(name)); err != nil {
			return nil, err
		}
		if err := enc.WriteValue(val); err != nil {
			return nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, Errorf(Validation, "request body is not valid JSON: %v", cleanErr(err))
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, Errorf(Validation, "request body has trailing data")
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Unmarshal decodes data into v strictly: unknown members, duplicate names,
// wrong types and trailing data are validation errors.
func Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v, json.RejectUnknownMembers(true)); err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return pe
		}
		return decodeError(err)
	}
	return nil
}

// decodeError is a decoder's error in the client's terms: where in the
// JSON, what was wanted and what came — never a Go type's name.
func decodeError(err error) *Error {
	var se *json.SemanticError
	if !errors.As(err, &se) {
		return Errorf(Validation, "invalid JSON: %v", cleanErr(err))
	}
	at := string(se.JSONPointer)
	if errors.Is(se.Err, json.ErrUnknownName) {
		name := se.JSONPointer.LastToken()
		return Errorf(Validation, "invalid JSON: unknown field %q", name).With("field", strings.TrimPrefix(at, "/"))
	}
	msg := "invalid JSON"
	if at != "" {
		msg += " at " + at
	}
	want, got := jsonKindOf(se.GoType), kindName(se.JSONKind)
	switch {
	case want != "" && got != "" && want != got && !(want == "an integer" && got == "a number"):
		msg += fmt.Sprintf(": want %s, got %s", want, got)
	case want != "":
		msg += ": want " + want
	}
	if se.Err != nil {
		msg += ": " + cleanErr(se.Err)
	}
	e := Errorf(Validation, "%s", msg)
	if at != "" {
		e = e.With("field", strings.TrimPrefix(at, "/"))
	}
	return e
}

// jsonKindOf names the JSON a Go type decodes from.
func jsonKindOf(t reflect.Type) string {
	if t == nil {
		return ""
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return ""
}

// kindName names a JSON kind as jsonKindOf does.
func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case '0':
		return "a number"
	case 'n':
		return "null"
	}
	return ""
}

// cleanErr trims the Go package prefix from decoder errors shown to clients.
func cleanErr(err error) string {
	s := err.Error()
	for _, p := range []string{"json: ", "jsontext: "} {
		if len(s) > len(p) && s[:len(p)] == p {
			s = s[len(p):]
		}
	}
	return s
}

// Marshal encodes v deterministically, the project's one JSON style.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("marshal: %w", err)
	}
	return b, nil
}

// Conversation is the wire view of a conversation.
type Conversation struct {
	ID              string   `json:"id"`
	Project         *string  `json:"project"`
	Title           *string  `json:"title"`
	Status          string   `json:"status"`
	LastSequence    int64    `json:"lastSequence"`
	ActiveRequestID *string  `json:"activeRequestId"`
	CreatedAt       float64  `json:"createdAt"`
	UpdatedAt       float64  `json:"updatedAt"`
	ArchivedAt      *float64 `json:"archivedAt"`
	Pinned          bool     `json:"pinned"`
	// Model is the conversation's model choice (null: the daemon's default).
	Model *string `json:"model"`
	// ForkedFrom is the source of a fork (null for any other conversation).
	ForkedFrom *ForkOrigin `json:"forkedFrom"`
	// DeletedAt is set on a deleted conversation (listed with status=deleted).
	DeletedAt *float64 `json:"deletedAt,omitempty"`
	// Owner is the name of the principal that created it; Visibility is
	// private (the owner and admins see it) or team (every principal).
	Owner      string `json:"owner"`
	Visibility string `json:"visibility"`
}

// ConversationPage is GET /operator/conversations/{id}: the conversation and
// one page of its frames.
type ConversationPage struct {
	Conversation      Conversation `json:"conversation"`
	Frames            []RawFrame   `json:"frames"`
	HasMore           bool         `json:"hasMore"`
	NextAfterSequence int64        `json:"nextAfterSequence"`
	LatestSequence    int64        `json:"latestSequence"`
	// ActiveTurn is the progress of the conversation's active turn; absent
	// when none runs.
	ActiveTurn *TurnProgress `json:"activeTurn,omitzero"`
}

// ConversationList is GET /operator/conversations.
type ConversationList struct {
	Conversations []Conversation `json:"conversations"`
	NextCursor    string         `json:"nextCursor,omitempty"`
}

// Turn is the wire view of a turn (the answer to cancel).
type Turn struct {
	RequestID         string   `json:"requestId"`
	ConversationID    string   `json:"conversationId"`
	Status            string   `json:"status"`
	ErrorCode         *string  `json:"errorCode"`
	CreatedAt         float64  `json:"createdAt"`
	StartedAt         *float64 `json:"startedAt"`
	EndedAt           *float64 `json:"endedAt"`
	CancelRequestedAt *float64 `json:"cancelRequestedAt"`
}

// EffectState is the answer to an effect acknowledgement.
type EffectState struct {
	EffectID       string   `json:"effectId"`
	Status         string   `json:"status"` // pending | applied | rejected | expired
	ClientRoute    *string  `json:"clientRoute"`
	RejectionCode  *string  `json:"rejectionCode"`
	AcknowledgedAt *float64 `json:"acknowledgedAt"`
	ExpiresAt      float64  `json:"expiresAt"`
}

// ProposalState is a stored proposal as GET .../proposals shows it.
type ProposalState struct {
	CommandProposal
	ConversationID string         `json:"conversationId"`
	RequestID      string         `json:"requestId"`
	Status         string         `json:"status"`
	ConfirmedAt    *float64       `json:"confirmedAt"`
	CompletedAt    *float64       `json:"completedAt"`
	Result         jsontext.Value `json:"result,omitzero"`
	ErrorCode      *string        `json:"errorCode"`
	CreatedAt      float64        `json:"createdAt"`
	// SubmittedBy names the principal whose turn produced the proposal and
	// DecidedBy the one that confirmed or denied it (extensions of the
	// contract's proposal view; absent when none, and for older proposals).
	SubmittedBy string `json:"submittedBy,omitzero"`
	DecidedBy   string `json:"decidedBy,omitzero"`
}

// TurnProgress is what an active turn is doing now, as the coordinator that
// owns it knows it: on GET conversation (activeTurn) and as the stream's
// status comment. It is not a frame: frames stay the durable log, progress
// is a passing view that only the owning process knows (a turn owned by
// another daemon shows the stored status).
type TurnProgress struct {
	RequestID string        `json:"requestId"`
	State     ProgressState `json:"state"`
	// QueuePosition is the turn's place among those waiting for a worker
	// (1 is next), while queued.
	QueuePosition int `json:"queuePosition,omitzero"`
	// Attempt is the model attempt about to be made (2 is the first retry),
	// RetryAt when (Unix seconds) and ErrorCode what failed, while retrying.
	Attempt   int       `json:"attempt,omitzero"`
	RetryAt   float64   `json:"retryAt,omitzero"`
	ErrorCode ErrorCode `json:"errorCode,omitzero"`
	// ProposalID is the proposal waiting for a decision or executing.
	ProposalID string `json:"proposalId,omitzero"`
	// Since is when the turn entered this state (Unix seconds).
	Since float64 `json:"since"`
	// Waiting are the turns waiting behind this one (whenBusy enqueue or
	// interrupt), in the order they will run.
	Waiting []WaitingTurn `json:"waiting,omitempty"`
}

// PreviewChars bounds WaitingTurn.Preview.
const PreviewChars = 200

// WaitingTurn is a turn accepted while another was active, waiting for its
// place: its instruction frame is stored when its place comes.
type WaitingTurn struct {
	RequestID string `json:"requestId"`
	// Position is its place in line (1 is next).
	Position int `json:"position"`
	// Preview is the start of its instruction (at most PreviewChars
	// characters).
	Preview string  `json:"preview"`
	Since   float64 `json:"since"`
	// CancelRequested: it was cancelled and will end, without running,
	// when its place comes.
	CancelRequested bool `json:"cancelRequested,omitzero"`
}

// ProgressState is an active turn's state.
type ProgressState string

// Progress states.
const (
	ProgressQueued               ProgressState = "queued"
	ProgressWorking              ProgressState = "working"
	ProgressRetrying             ProgressState = "retrying"
	ProgressAwaitingConfirmation ProgressState = "awaiting_confirmation"
	ProgressExecuting            ProgressState = "executing"
	// ProgressDatabaseUnavailable: the state database does not answer (a
	// restart, a failover); the turn's write is tried again at RetryAt
	// (Attempt is the next try), until the daemon's outage budget runs out.
	ProgressDatabaseUnavailable ProgressState = "database_unavailable"
)

// ApprovalPendingMessage is what a direct command that needs a second
// approver answers, for a person to read.
const ApprovalPendingMessage = "Sent for approval: waiting for another approver"

// ApprovalRequest is the answer (202) to a direct command that needs a
// second approver: its pending proposal, which another principal confirms
// or denies like any proposal, and ApprovalPendingMessage.
type ApprovalRequest struct {
	ProposalState
	Message string `json:"message"`
}
