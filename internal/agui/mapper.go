package agui

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// EffectTools are the cockpit's effects as tools, by effect kind: the
// names a client declares in tools to run them itself.
var EffectTools = map[string]string{
	protocol.EffectNavigate: "navigate",
	protocol.EffectSelect:   "select",
	protocol.EffectTheme:    "set_theme",
	protocol.EffectPrefill:  "prefill_form",
}

// isEffectTool reports whether a tool of the operator's catalog is an
// effect's.
func isEffectTool(name string) bool {
	for _, t := range EffectTools {
		if t == name {
			return true
		}
	}
	return false
}

// ActivityProposal is the activity type of a proposal's state changes.
const ActivityProposal = "studio.proposal"

// mapper turns the frames of one run into AG-UI events. It is the one
// place that knows the mapping (docs/agui.md); a run's frames go through
// it in sequence order, from the run's start, so that a reconnect rebuilds
// the same state before it writes anything.
type mapper struct {
	threadID, runID string
	// frontend are the effect tools the client runs itself.
	frontend map[string]bool
	// base is the daemon's address as the client reached it (cockpit links).
	base   string
	convID string

	text       string                              // the open assistant message ("" none)
	steps      []string                            // open steps, in order
	stepOf     map[string]string                   // a read call's step, by call id
	effectCall map[string]protocol.ToolCallPayload // effect tool calls not yet shown, by call id
	lastEffect string                              // the effect tool call its ui_command follows
	clientRuns map[string]bool                     // call ids whose result is the client's
	proposals  map[string]protocol.CommandProposal // proposals seen, by id
	interrupts []Interrupt
	pending    []string // frontend tool calls of this run
	failure    *protocol.Error
	// result is RUN_FINISHED's result when the run has something to say
	// (acknowledgements).
	result any
	// users: the instruction frames become user messages (a history, not
	// a run, whose client sent them).
	users bool
}

func newMapper(threadID, runID, convID, base string, frontend map[string]bool) *mapper {
	return &mapper{threadID: threadID, runID: runID, convID: convID, base: base, frontend: frontend,
		stepOf: map[string]string{}, effectCall: map[string]protocol.ToolCallPayload{}, clientRuns: map[string]bool{},
		proposals: map[string]protocol.CommandProposal{}}
}

func seqID(prefix string, seq int64) string { return prefix + strconv.FormatInt(seq, 10) }

// started is the run's first event.
func (m *mapper) started() Event {
	return ev(RunStarted, "threadId", m.threadID, "runId", m.runID)
}

// frame is the events of one frame, and whether the run ends with it.
func (m *mapper) frame(f protocol.Frame) (out []Event, end bool) {
	switch p := f.Payload.(type) {
	case protocol.TextPayload:
		if p.Role == protocol.RoleUser {
			// The turn's instruction: a run's client sent it as the run's
			// last user message.
			out = m.closeText(out)
			if m.users {
				id := seqID("user-", f.Sequence)
				out = append(out, ev(TextMessageStart, "messageId", id, "role", "user"),
					ev(TextMessageContent, "messageId", id, "delta", p.Content), ev(TextMessageEnd, "messageId", id))
			}
			return out, false
		}
		if m.text == "" {
			m.text = seqID("msg-", f.Sequence)
			out = append(out, ev(TextMessageStart, "messageId", m.text, "role", "assistant"))
		}
		out = append(out, ev(TextMessageContent, "messageId", m.text, "delta", p.Content))
	case protocol.ToolCallPayload:
		out = m.closeText(out)
		if isEffectTool(p.Tool) {
			// Shown at its ui_command (a frontend tool call, or text), or
			// at its result when it was refused.
			m.effectCall[p.CallID], m.lastEffect = p, p.CallID
			return out, false
		}
		if p.Mode == "read" {
			m.stepOf[p.CallID] = p.Tool
			m.steps = append(m.steps, p.Tool)
			out = append(out, ev(StepStarted, "stepName", p.Tool))
		}
		out = append(out, toolCall(p.CallID, p.Tool, string(p.Arguments))...)
	case protocol.UICommandPayload:
		out = m.closeText(out)
		call, ok := m.effectCall[m.lastEffect]
		delete(m.effectCall, m.lastEffect)
		tool := EffectTools[p.Effect.Kind]
		if m.frontend[tool] {
			args, _ := json.Marshal(p.Effect)
			out = append(out, toolCall(p.EffectID, tool, string(args))...)
			m.pending = append(m.pending, p.EffectID)
			if ok {
				m.clientRuns[call.CallID] = true
			}
			return out, false
		}
		if ok {
			out = append(out, toolCall(call.CallID, call.Tool, string(call.Arguments))...)
		}
		// A client that runs no such tool is told in words: requested,
		// never applied.
		id := "effect-" + p.EffectID
		out = append(out, ev(TextMessageStart, "messageId", id, "role", "assistant"),
			ev(TextMessageContent, "messageId", id, "delta", describeEffect(p.Effect)),
			ev(TextMessageEnd, "messageId", id))
	case protocol.ToolResultPayload:
		out = m.closeText(out)
		if m.clientRuns[p.CallID] {
			delete(m.clientRuns, p.CallID)
			return out, false // the client's tool result is the effect's answer
		}
		if call, ok := m.effectCall[p.CallID]; ok {
			delete(m.effectCall, p.CallID)
			out = append(out, toolCall(call.CallID, call.Tool, string(call.Arguments))...)
		}
		out = append(out, ev(ToolCallResult, "messageId", seqID("result-", f.Sequence), "toolCallId", p.CallID,
			"content", resultContent(p), "role", "tool"))
		if step, ok := m.stepOf[p.CallID]; ok {
			delete(m.stepOf, p.CallID)
			out = m.finishStep(out, step)
		}
	case protocol.ProposalPayload:
		out = m.closeText(out)
		m.proposals[p.Proposal.ID] = p.Proposal
	case protocol.ConfirmationPayload:
		out = m.closeText(out)
		if p.State == protocol.ConfirmationRequired {
			if prop, ok := m.proposals[p.ProposalID]; ok {
				m.interrupts = append(m.interrupts, m.interrupt(prop))
				return m.finish(out, ev(RunFinished, "threadId", m.threadID, "runId", m.runID,
					"outcome", map[string]any{"type": "interrupt", "interrupts": m.interrupts})), true
			}
		}
		content := map[string]any{"proposalId": p.ProposalID, "state": string(p.State)}
		if p.DecidedBy != "" {
			content["decidedBy"] = p.DecidedBy
		}
		out = append(out, ev(ActivitySnapshot, "messageId", "proposal-"+p.ProposalID, "activityType", ActivityProposal,
			"content", content, "replace", true))
	case protocol.ErrorPayload:
		out = m.closeText(out)
		e := p.Error
		m.failure = &e
	case protocol.DonePayload:
		out = m.closeText(out)
		return m.finish(out, m.done(p.Outcome)), true
	}
	return out, false
}

// done is the event that ends a run whose turn ended with outcome.
func (m *mapper) done(o protocol.Outcome) Event {
	switch o {
	case protocol.OutcomeCompleted:
		outcome := map[string]any{"type": "success"}
		if len(m.pending) > 0 {
			outcome["pendingToolCallIds"] = m.pending
		}
		e := ev(RunFinished, "threadId", m.threadID, "runId", m.runID, "outcome", outcome)
		if m.result != nil {
			e.Fields["result"] = m.result
		}
		return e
	case protocol.OutcomeCancelled:
		return ev(RunFinished, "threadId", m.threadID, "runId", m.runID, "outcome", map[string]any{"type": "cancelled"})
	}
	pe := m.failure
	if pe == nil {
		pe = protocol.Errorf(protocol.ServiceFailure, "the turn failed")
	}
	return runError(pe)
}

// runError is RUN_ERROR for a typed error: its code, its message, and the
// whole ProtocolError as the event's raw form.
func runError(pe *protocol.Error) Event {
	return ev(RunError, "code", string(pe.Code), "message", pe.Message, "rawEvent", protocol.ErrorBody{Error: pe})
}

// finish closes what is open (steps) and ends the run with last.
func (m *mapper) finish(out []Event, last Event) []Event {
	out = m.closeText(out)
	for len(m.steps) > 0 {
		out = m.finishStep(out, m.steps[len(m.steps)-1])
	}
	return append(out, last)
}

func (m *mapper) finishStep(out []Event, step string) []Event {
	for i := len(m.steps) - 1; i >= 0; i-- {
		if m.steps[i] == step {
			m.steps = append(m.steps[:i], m.steps[i+1:]...)
			return append(out, ev(StepFinished, "stepName", step))
		}
	}
	return out
}

func (m *mapper) closeText(out []Event) []Event {
	if m.text != "" {
		out = append(out, ev(TextMessageEnd, "messageId", m.text))
		m.text = ""
	}
	return out
}

// reopen is what a run that resumes writing after a cursor sends first:
// the starts of what is still open, which its client saw on the
// connection it lost.
func (m *mapper) reopen() []Event {
	var out []Event
	for _, s := range m.steps {
		out = append(out, ev(StepStarted, "stepName", s))
	}
	if m.text != "" {
		out = append(out, ev(TextMessageStart, "messageId", m.text, "role", "assistant"))
	}
	return out
}

// interrupt is a proposal as AG-UI's interrupt: the summary to show, and
// what a person needs to decide (risk, impact, target and version, command
// hash, expiry, where the cockpit shows it).
func (m *mapper) interrupt(p protocol.CommandProposal) Interrupt {
	meta := map[string]any{"proposalId": p.ID, "commandType": p.CommandType, "risk": p.Risk, "commandHash": p.CommandHash,
		"command": p.Command, "conversationId": m.convID}
	if p.Impact != "" {
		meta["impact"] = p.Impact
	}
	if p.Target != nil {
		meta["target"] = map[string]any{"kind": p.Target.Kind, "id": p.Target.ID, "version": p.Target.Version}
	}
	if p.TargetName != "" {
		meta["targetName"] = p.TargetName
	}
	if m.base != "" {
		q := url.Values{"conversation": {m.convID}, "proposal": {p.ID}}
		meta["cockpitUrl"] = m.base + "/#" + q.Encode()
	}
	return Interrupt{ID: p.ID, Reason: ReasonConfirmation, Message: p.Summary, ResponseSchema: decisionSchema,
		ExpiresAt: protocol.Time(p.ExpiresAt).Format(time.RFC3339Nano), Metadata: meta}
}

func toolCall(id, name, args string) []Event {
	return []Event{ev(ToolCallStart, "toolCallId", id, "toolCallName", name),
		ev(ToolCallArgs, "toolCallId", id, "delta", args), ev(ToolCallEnd, "toolCallId", id)}
}

// resultContent is a tool result as the text of TOOL_CALL_RESULT: the
// result's JSON, or {"error": ProtocolError}.
func resultContent(p protocol.ToolResultPayload) string {
	if !p.OK && p.Error != nil {
		b, _ := json.Marshal(protocol.ErrorBody{Error: p.Error})
		return string(b)
	}
	if len(p.Result) == 0 {
		return "{}"
	}
	return string(p.Result)
}

// describeEffect says in words what an effect asked the cockpit, for a
// client that does not run it.
func describeEffect(e protocol.Effect) string {
	var what string
	switch e.Kind {
	case protocol.EffectNavigate:
		what = "open " + e.Space
		if len(e.Params) > 0 {
			b, _ := json.Marshal(e.Params)
			what += " " + string(b)
		}
	case protocol.EffectSelect:
		b, _ := json.Marshal(e.Selection)
		what = "select " + string(b) + " in " + e.Space
	case protocol.EffectTheme:
		what = "switch to the " + e.Theme + " theme"
	case protocol.EffectPrefill:
		keys := make([]string, 0, len(e.Values))
		for k := range e.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		what = fmt.Sprintf("open the %s form filled in (%s)", e.Form, strings.Join(keys, ", "))
	default:
		what = e.Kind
	}
	return "(Requested of the Studio cockpit, not applied here: " + what + ".)"
}
