// Package agui is the AG-UI door (docs/agui.md): POST /api/agui takes
// AG-UI's RunAgentInput and answers with AG-UI events over Server-Sent
// Events. A thread is a conversation, a run is a turn (or the rest of a
// turn a resume continues); the events are the run's durable frames
// mapped one by one (mapper.go), read from the store, so a frame is
// durable before it is sent and a run sent again, or reconnected after
// its last event id, gets the rest without gaps or duplicates.
//
// The door decides nothing itself: every step asks the daemon's policy
// (internal/policy) through the request's gate, and decisions on
// proposals go through the coordinator's confirm and deny, as at every
// other door. It takes small interfaces, not the coordinator.
package agui

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/sse"
)

// Conversations is what the door needs of the conversation service.
type Conversations interface {
	PolicyResource(ctx context.Context, id string) (policy.Conversation, error)
	CreateConversationAs(ctx context.Context, id string, req protocol.CreateConversationRequest) (protocol.Conversation, error)
	OpenStream(ctx context.Context, convID string, after int64) (last int64, err error)
	ReadFrames(ctx context.Context, convID string, after int64, limit int) ([]protocol.RawFrame, error)
	Subscribe(convID string) *feed.Subscription
}

// Turns is what the door needs of the coordinator.
type Turns interface {
	SubmitTurnAs(ctx context.Context, convID, requestID string, req protocol.TurnRequest) (protocol.TurnAccepted, error)
	Turn(ctx context.Context, convID, requestID string) (protocol.Turn, error)
	ProposalResource(ctx context.Context, convID, proposalID string) (policy.Proposal, error)
	GetProposal(ctx context.Context, convID, proposalID string) (protocol.ProposalState, error)
	Confirm(ctx context.Context, convID, proposalID string, req protocol.ConfirmProposalRequest) (protocol.ProposalResult, error)
	Deny(ctx context.Context, convID, proposalID string) (protocol.ProposalResult, error)
	EffectState(ctx context.Context, convID, effectID string) (protocol.EffectState, error)
	AckEffect(ctx context.Context, convID, effectID string, req protocol.AckEffectRequest) (protocol.EffectState, error)
}

// Config wires a Door.
type Config struct {
	Conversations Conversations
	Turns         Turns
	// Refuse writes a typed error as the daemon's API does (status, body).
	Refuse func(http.ResponseWriter, *http.Request, error)
	// AccessSignal closes when a right may have been taken away (a token
	// revoked, a principal disabled or given another role, a conversation
	// another visibility); StillAllowed then decides the run's request
	// again, for its credential and conversation as they are now. Without
	// them an open run is decided once, when it starts.
	AccessSignal func() <-chan struct{}
	StillAllowed func(ctx context.Context, convID string, action policy.Action) error
	Logger       *slog.Logger
	// Heartbeat is the interval of SSE comment heartbeats on a quiet run
	// (default sse.DefaultHeartbeat); WriteTimeout bounds one write
	// (default sse.DefaultWriteTimeout).
	Heartbeat    time.Duration
	WriteTimeout time.Duration
}

// Door serves POST /api/agui. The request's context carries its
// principal and the policy's gate (the daemon authenticated it).
type Door struct {
	cfg Config
}

// New returns the door.
func New(cfg Config) *Door {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = sse.DefaultHeartbeat
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = sse.DefaultWriteTimeout
	}
	if cfg.Refuse == nil {
		cfg.Refuse = func(w http.ResponseWriter, _ *http.Request, err error) {
			pe := protocol.ErrorOf(err)
			b, _ := protocol.Marshal(protocol.ErrorBody{Error: pe})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(pe.Code.HTTPStatus())
			_, _ = w.Write(b)
		}
	}
	return &Door{cfg: cfg}
}

// page is how many frames one store read of a run takes.
const page = 500

// maxAcks bounds the tool results one run acknowledges: the newest.
const maxAcks = 32

// run is one response: the frames of one request after a sequence,
// written from a cursor on.
type run struct {
	convID, requestID string
	after             int64 // the run's frames follow this sequence
	cursor            int64 // the client has the events of frames up to here
	snapshot          bool  // MESSAGES_SNAPSHOT first
	m                 *mapper
}

// ServeHTTP answers one run. Refusals before the run starts (a bad input,
// a denial, a conflict, an expired interrupt) are the API's typed errors
// with their status; once it started, the run ends with RUN_FINISHED or
// RUN_ERROR carrying the protocol's error code.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := d.serve(w, r); err != nil {
		d.cfg.Refuse(w, r, err)
	}
}

func (d *Door) serve(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	in, props, err := DecodeInput(body)
	if err != nil {
		return err
	}
	rn, err := newRun(r, in, props)
	if err != nil {
		return err
	}
	convID, requestID, m := rn.convID, rn.requestID, rn.m

	res, err := d.cfg.Conversations.PolicyResource(ctx, convID)
	exists := err == nil
	switch {
	case protocol.IsCode(err, protocol.NotFound):
	case err != nil:
		return err
	default:
		if err := policy.AskConversation(ctx, policy.ReadConversation, res); err != nil {
			return err
		}
	}

	// A run sent again (a reconnect): its turn exists; the rest of it.
	if exists {
		_, err := d.cfg.Turns.Turn(ctx, convID, requestID)
		switch {
		case err == nil:
			if rn.after, err = d.runStart(ctx, convID, requestID); err != nil {
				return err
			}
			return d.stream(w, r, rn)
		case !protocol.IsCode(err, protocol.NotFound):
			return err
		}
	}

	if len(in.Resume) > 0 {
		if !exists {
			return protocol.Errorf(protocol.NotFound, "thread %s has no interrupts", in.ThreadID)
		}
		if err := d.resume(ctx, in.Resume, rn); err != nil {
			return err
		}
	}

	if exists {
		acks, err := d.acknowledge(ctx, convID, res, in.Messages)
		if err != nil {
			return err
		}
		if len(acks) > 0 {
			m.result = map[string]any{"acknowledged": acks}
		}
	}

	last := lastUser(in.Messages)
	if len(in.Resume) == 0 && last != nil {
		if err := d.submit(ctx, in, props, *last, rn, exists); err != nil {
			return err
		}
		return d.stream(w, r, rn)
	}
	if len(in.Resume) > 0 {
		return d.stream(w, r, rn)
	}
	// No instruction and no interrupt to answer.
	if !exists {
		return protocol.Errorf(protocol.NotFound, "thread %s has no messages yet: send a user message", in.ThreadID)
	}
	// A run that only answers frontend tools gets their acknowledgements;
	// one with no messages at all, the history.
	rn.requestID = ""
	rn.snapshot = rn.snapshot || len(in.Messages) == 0
	return d.stream(w, r, rn)
}

// newRun is the run a request asks for: its thread's conversation, the
// turn its run id names, the cursor of a reconnect (Last-Event-ID) and the
// effects the client declared as frontend tools.
func newRun(r *http.Request, in RunAgentInput, props Props) (*run, error) {
	var cursor int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		var err error
		if cursor, err = strconv.ParseInt(v, 10, 64); err != nil || cursor < 0 {
			return nil, protocol.Errorf(protocol.Validation, "Last-Event-ID must be a frame sequence").With("field", "Last-Event-ID")
		}
	}
	convID := ConversationID(in.ThreadID)
	frontend := map[string]bool{}
	for _, t := range in.Tools {
		if isEffectTool(t.Name) {
			frontend[t.Name] = true
		}
	}
	m := newMapper(in.ThreadID, in.RunID, convID, baseURL(r), frontend)
	return &run{convID: convID, requestID: RequestID(convID, in.RunID), cursor: cursor, snapshot: props.MessagesSnapshot, m: m}, nil
}

// resume answers a run's interrupts: every entry is decided before any
// applies, so one refused entry leaves all of them open. The run is then
// the rest of the interrupted turn, from its interrupt.
func (d *Door) resume(ctx context.Context, entries []ResumeEntry, rn *run) error {
	decisions := make([]decision, len(entries))
	for i, e := range entries {
		var err error
		if decisions[i], err = d.prepare(ctx, rn.convID, e); err != nil {
			return protocol.ErrorOf(err).With("interruptId", e.InterruptID)
		}
	}
	for _, dc := range decisions {
		if err := d.apply(ctx, rn.convID, dc); err != nil {
			return protocol.ErrorOf(err).With("interruptId", dc.entry.InterruptID)
		}
	}
	var err error
	rn.after, rn.requestID, err = d.interruptPoint(ctx, rn.convID, entries[0].InterruptID)
	return err
}

// lastUser is the last message when it is the user's: the turn's
// instruction. A run whose history ends otherwise asks for no turn.
func lastUser(msgs []Message) *Message {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return nil
	}
	return &msgs[len(msgs)-1]
}

// submit starts the run's turn, creating the thread's conversation on its
// first run.
func (d *Door) submit(ctx context.Context, in RunAgentInput, props Props, user Message, rn *run, exists bool) error {
	text, err := user.Text()
	if err != nil {
		return err
	}
	instruction := withContext(text, in.Context)
	if !exists {
		if err := policy.Ask(ctx, policy.CreateConversation, policy.Studio{}); err != nil {
			return err
		}
		title := in.ThreadID
		if len([]rune(title)) > 200 {
			title = string([]rune(title)[:200])
		}
		if _, err := d.cfg.Conversations.CreateConversationAs(ctx, rn.convID, protocol.CreateConversationRequest{Title: &title, Visibility: props.Visibility}); err != nil {
			// Two first runs at once: the other created it.
			if _, rerr := d.cfg.Conversations.PolicyResource(ctx, rn.convID); rerr != nil {
				return err
			}
		}
	}
	res, err := d.cfg.Conversations.PolicyResource(ctx, rn.convID)
	if err != nil {
		return err
	}
	if err := policy.AskConversation(ctx, policy.Converse, res); err != nil {
		return err
	}
	// The newest sequence, whatever was purged before it.
	last, err := d.cfg.Conversations.OpenStream(ctx, rn.convID, maxSequence)
	if err != nil {
		return err
	}
	view := protocol.ContextSnapshot{Space: "mission", Route: "/mission"}
	if props.View != nil {
		view = *props.View
	}
	client := protocol.ClientText
	if len(rn.m.frontend) > 0 {
		client = protocol.ClientCockpit
	}
	acc, err := d.cfg.Turns.SubmitTurnAs(ctx, rn.convID, rn.requestID, protocol.TurnRequest{Instruction: instruction, Context: view,
		ExpectedLastSequence: &last, Client: client, WhenBusy: props.WhenBusy})
	if err != nil {
		if _, terr := d.cfg.Turns.Turn(ctx, rn.convID, rn.requestID); terr == nil {
			// The same run sent twice at once: the other submitted it.
			rn.after, err = d.runStart(ctx, rn.convID, rn.requestID)
		}
		return err
	}
	rn.after = last
	if acc.AcceptedSequence > 0 {
		rn.after = acc.AcceptedSequence - 1
	}
	return nil
}

// maxSequence is a cursor past any conversation's frames.
const maxSequence = 1 << 62

// withContext adds the run's context entries to the instruction: the
// operator reads them as the person's.
func withContext(text string, items []ContextItem) string {
	if len(items) == 0 {
		return text
	}
	var b strings.Builder
	b.WriteString(text)
	b.WriteString("\n\nContext:")
	for _, c := range items {
		b.WriteString("\n- ")
		b.WriteString(c.Description)
		b.WriteString(": ")
		b.WriteString(c.Value)
	}
	return b.String()
}

// decision is one resume entry, decided by the policy and ready to apply.
type decision struct {
	entry  ResumeEntry
	action policy.Action // confirm or deny; "" when there is nothing to do
	req    protocol.ConfirmProposalRequest
}

// prepare checks one resume entry and asks the policy what it does, as
// the HTTP and CLI doors ask it (an agent's token cannot confirm;
// four-eyes holds). Nothing changes: every entry of a run is prepared
// before any is applied.
func (d *Door) prepare(ctx context.Context, convID string, e ResumeEntry) (decision, error) {
	pid := e.InterruptID
	dc := decision{entry: e, action: policy.Deny}
	var dec Decision
	if e.Status == ResumeResolved {
		if len(e.Payload) == 0 {
			return dc, protocol.Errorf(protocol.Validation, `a resolved interrupt needs a payload {"decision": "confirm" | "deny"}`).With("field", "resume.payload")
		}
		if err := protocol.DecodeRequest(e.Payload, &dec); err != nil {
			return dc, err
		}
		switch dec.Decision {
		case DecideConfirm:
			dc.action = policy.Confirm
		case DecideDeny:
		default:
			return dc, protocol.Errorf(protocol.Validation, "decision must be confirm or deny").With("field", "resume.payload.decision")
		}
	}
	res, err := d.cfg.Turns.ProposalResource(ctx, convID, pid)
	if err != nil {
		return dc, err
	}
	if err := policy.AskProposal(ctx, policy.ReadProposal, res); err != nil {
		return dc, err
	}
	st, err := d.cfg.Turns.GetProposal(ctx, convID, pid)
	if err != nil {
		return dc, err
	}
	if st.Status == string(protocol.ResultExpired) && dc.action == policy.Confirm {
		return dc, expired(pid)
	}
	if st.Status != "pending" && e.Status == ResumeCancelled {
		dc.action = "" // already closed: nothing to cancel
		return dc, nil
	}
	if err := policy.AskProposal(ctx, dc.action, res); err != nil {
		return dc, err
	}
	dc.req = protocol.ConfirmProposalRequest{ExpectedCommandHash: dec.ExpectedCommandHash, ExpectedTargetVersion: dec.ExpectedTargetVersion}
	if dc.req.ExpectedCommandHash == "" {
		dc.req.ExpectedCommandHash = st.CommandHash // the interrupt carried it: what the person saw
	}
	return dc, nil
}

// apply confirms or denies through the coordinator's one path, as every
// door does.
func (d *Door) apply(ctx context.Context, convID string, dc decision) error {
	pid := dc.entry.InterruptID
	switch dc.action {
	case policy.Deny:
		_, err := d.cfg.Turns.Deny(ctx, convID, pid)
		return err
	case policy.Confirm:
		out, err := d.cfg.Turns.Confirm(ctx, convID, pid, dc.req)
		if err != nil {
			return err
		}
		if out.Status == protocol.ResultExpired {
			return expired(pid)
		}
	}
	return nil
}

func expired(pid string) error {
	return protocol.Errorf(protocol.StaleContext, "interrupt %s expired unconfirmed; nothing was changed: answer it cancelled to go on", pid).
		With("status", string(protocol.ResultExpired))
}

// acknowledge records the client's results of frontend tool calls (the
// effects it ran) as the effects' acknowledgements: applied with the
// route it shows, or rejected with a code. A result that says neither is
// rejected as client_error: requested is never applied.
func (d *Door) acknowledge(ctx context.Context, convID string, conv policy.Conversation, msgs []Message) ([]map[string]any, error) {
	var out []map[string]any
	asked := false
	n := 0
	for i := len(msgs) - 1; i >= 0 && n < maxAcks; i-- {
		msg := msgs[i]
		if msg.Role != "tool" {
			continue
		}
		n++
		st, err := d.cfg.Turns.EffectState(ctx, convID, msg.ToolCallID)
		if err != nil || st.Status != "pending" {
			continue // not an effect of this thread, or answered already
		}
		if !asked {
			if err := policy.AskConversation(ctx, policy.AcknowledgeEffect, conv); err != nil {
				return nil, err
			}
			asked = true
		}
		ack := map[string]any{"effectId": msg.ToolCallID}
		st, err = d.cfg.Turns.AckEffect(ctx, convID, msg.ToolCallID, ackRequest(msg))
		if err != nil {
			ack["status"], ack["error"] = "refused", protocol.ErrorOf(err)
		} else {
			ack["status"] = st.Status
		}
		out = append(out, ack)
	}
	return out, nil
}

// ackRequest reads a frontend tool's result as an acknowledgement.
func ackRequest(msg Message) protocol.AckEffectRequest {
	clientError := "client_error"
	if msg.Error != "" {
		return protocol.AckEffectRequest{Status: "rejected", RejectionCode: &clientError, Detail: msg.Error}
	}
	text, _ := msg.Text()
	var req protocol.AckEffectRequest
	if err := protocol.DecodeRequest([]byte(text), &req); err != nil || (req.Status != "applied" && req.Status != "rejected") {
		return protocol.AckEffectRequest{Status: "rejected", RejectionCode: &clientError,
			Detail: `the tool result is not {"status":"applied","clientRoute":...} or {"status":"rejected","rejectionCode":...}`}
	}
	return req
}

// scan reads the conversation's retained frames in order until fn says
// stop.
func (d *Door) scan(ctx context.Context, convID string, fn func(protocol.RawFrame) bool) error {
	after := int64(0)
	if _, err := d.cfg.Conversations.OpenStream(ctx, convID, 0); err != nil {
		pe := protocol.ErrorOf(err)
		if pe.Code != protocol.ReplayGap {
			return err
		}
		if v, ok := pe.Details["earliestAfterSequence"].(int64); ok {
			after = v
		}
	}
	for {
		frames, err := d.cfg.Conversations.ReadFrames(ctx, convID, after, page)
		if err != nil {
			return err
		}
		for _, f := range frames {
			if !fn(f) {
				return nil
			}
			after = f.Sequence
		}
		if len(frames) < page {
			return nil
		}
	}
}

// runStart is where a turn's run starts: before its first frame (its
// instruction), or at the end of the conversation for a turn still
// waiting behind another.
func (d *Door) runStart(ctx context.Context, convID, requestID string) (int64, error) {
	start := int64(-1)
	var last int64
	err := d.scan(ctx, convID, func(f protocol.RawFrame) bool {
		last = f.Sequence
		if f.RequestID == requestID {
			start = f.Sequence - 1
			return false
		}
		return true
	})
	if start < 0 {
		start = last
	}
	return start, err
}

// interruptPoint is where a resumed run starts: after the interrupt's
// confirmation(required) frame, in its turn.
func (d *Door) interruptPoint(ctx context.Context, convID, proposalID string) (after int64, requestID string, err error) {
	found := false
	err = d.scan(ctx, convID, func(f protocol.RawFrame) bool {
		if f.Type != protocol.FrameConfirmation {
			return true
		}
		p, derr := protocol.DecodePayload(f.Type, f.Payload)
		if c, ok := p.(protocol.ConfirmationPayload); derr == nil && ok && c.ProposalID == proposalID && c.State == protocol.ConfirmationRequired {
			after, requestID, found = f.Sequence, f.RequestID, true
			return false
		}
		return true
	})
	if err == nil && !found {
		err = protocol.Errorf(protocol.NotFound, "interrupt %s not found", proposalID)
	}
	return after, requestID, err
}

// readBody reads the run's input, bounded, and lifts the read deadline
// the daemon's edge set once it is in.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return nil, protocol.Errorf(protocol.Validation, "Content-Type must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		return body, nil
	case errors.As(err, &tooBig):
		return nil, protocol.Errorf(protocol.Validation, "request body is larger than %d bytes", maxBody)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, protocol.Errorf(protocol.Validation, "the request body did not arrive in time")
	}
	return nil, protocol.Errorf(protocol.Validation, "the request body could not be read")
}

// baseURL is the daemon's address as the client reached it.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
