package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The model context budget (docs/design.md §13): the newest complete turns
// that fit both caps, added newest to oldest by whole turn. The system prompt
// and tool schemas are budgeted separately.
const (
	maxContextFrames = 64
	maxContextBytes  = 128 << 10
)

// receipt records which frames a turn's model context holds, so every answer
// traces back to its snapshot. It is stored in the turn's context_json.
type receipt struct {
	FromSequence int64  `json:"fromSequence"` // 0 when no earlier turn is included
	ToSequence   int64  `json:"toSequence"`
	Turns        int    `json:"turns"`
	Frames       int    `json:"frames"`
	Bytes        int    `json:"bytes"`
	Hash         string `json:"hash"`
	// Model and Provider name the configured model the turn talks to
	// the conversation's choice when the turn started.
	Model    string `json:"model,omitempty"`
	Provider string `json:"provider,omitempty"`
}

// historyTurn is one earlier turn's frames, oldest first.
type historyTurn struct {
	frames []store.Frame
	bytes  int
}

// selectHistory picks the newest complete turns of frames (all before the
// current turn, in sequence order) that fit the caps, and the receipt of the
// selection. A turn is complete when its first frame is the user's instruction
// and its last is done; a turn cut by the window's start is left out.
func selectHistory(frames []store.Frame, maxFrames, maxBytes int) ([]store.Frame, receipt) {
	var turns []historyTurn
	for i := 0; i < len(frames); {
		j := i
		for j < len(frames) && frames[j].RequestID == frames[i].RequestID {
			j++
		}
		group := frames[i:j]
		if isCompleteTurn(group) {
			n := 0
			for _, f := range group {
				n += len(f.Payload)
			}
			turns = append(turns, historyTurn{frames: group, bytes: n})
		}
		i = j
	}
	var picked []historyTurn
	nFrames, nBytes := 0, 0
	for k := len(turns) - 1; k >= 0; k-- {
		t := turns[k]
		if nFrames+len(t.frames) > maxFrames || nBytes+t.bytes > maxBytes {
			break
		}
		nFrames += len(t.frames)
		nBytes += t.bytes
		picked = append(picked, t)
	}
	var out []store.Frame
	for k := len(picked) - 1; k >= 0; k-- {
		out = append(out, picked[k].frames...)
	}
	r := receipt{Turns: len(picked), Frames: nFrames, Bytes: nBytes, Hash: hashFrames(out)}
	if len(out) > 0 {
		r.FromSequence, r.ToSequence = out[0].Sequence, out[len(out)-1].Sequence
	}
	return out, r
}

func isCompleteTurn(group []store.Frame) bool {
	if len(group) < 2 || group[0].Type != protocol.FrameText || group[len(group)-1].Type != protocol.FrameDone {
		return false
	}
	p, err := protocol.DecodePayload(protocol.FrameText, group[0].Payload)
	return err == nil && p.(protocol.TextPayload).Role == protocol.RoleUser
}

// hashFrames is the SHA-256 over each included frame's sequence, type and
// payload: it changes when any included frame changes, and only then.
func hashFrames(frames []store.Frame) string {
	h := sha256.New()
	for _, f := range frames {
		fmt.Fprintf(h, "%d\x00%s\x00%d\x00", f.Sequence, f.Type, len(f.Payload))
		h.Write(f.Payload)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// loadHistory reads the frames that can precede the current turn in the
// model context: at most maxContextFrames before its first frame.
func (c *Coordinator) loadHistory(ctx context.Context, convID string, firstSeq int64) ([]store.Frame, error) {
	after := max(firstSeq-1-maxContextFrames, 0)
	frames, err := c.store.ListFrames(ctx, store.ListFramesParams{ConversationID: convID, AfterSequence: after, Limit: maxContextFrames})
	if err != nil {
		return nil, err
	}
	out := frames[:0]
	for _, f := range frames {
		if f.Sequence < firstSeq {
			out = append(out, f)
		}
	}
	return out, nil
}

// messages turns stored frames into model messages: user and assistant text,
// assistant tool calls and their results. Other frames are the client's.
func messages(frames []store.Frame) []model.Message {
	var b messageBuilder
	for _, f := range frames {
		b.add(f)
	}
	return b.done()
}

// messageBuilder builds model messages frame by frame, so a turn's frames
// can be read a page at a time and dropped. An assistant message's text
// streamed over many frames goes into a strings.Builder: appending each
// frame's text to a string copied it whole each time (quadratic in a turn
// of many frames).
type messageBuilder struct {
	msgs []model.Message
	text strings.Builder // text of the last message (an assistant's) not yet in it
}

// flush puts the buffered text into the last message.
func (b *messageBuilder) flush() {
	if b.text.Len() > 0 {
		b.msgs[len(b.msgs)-1].Content += b.text.String()
		b.text.Reset()
	}
}

func (b *messageBuilder) push(m model.Message) {
	b.flush()
	b.msgs = append(b.msgs, m)
}

// assistant is the open assistant message, a new one if the last is not.
func (b *messageBuilder) assistant() *model.Message {
	if n := len(b.msgs); n > 0 && b.msgs[n-1].Role == model.RoleAssistant {
		return &b.msgs[n-1]
	}
	b.push(model.Message{Role: model.RoleAssistant})
	return &b.msgs[len(b.msgs)-1]
}

func (b *messageBuilder) add(f store.Frame) {
	p, err := protocol.DecodePayload(f.Type, f.Payload)
	if err != nil {
		return
	}
	switch v := p.(type) {
	case protocol.TextPayload:
		if v.Role == protocol.RoleUser {
			b.push(model.Message{Role: model.RoleUser, Content: v.Content})
			return
		}
		if a := b.assistant(); len(a.ToolCalls) > 0 { // text after tool calls starts a new message
			b.push(model.Message{Role: model.RoleAssistant})
		}
		b.text.WriteString(v.Content)
	case protocol.ToolCallPayload:
		a := b.assistant()
		a.ToolCalls = append(a.ToolCalls, model.ToolCall{ID: v.CallID, Name: v.Tool, Arguments: v.Arguments})
	case protocol.ToolResultPayload:
		b.push(toolMessage(v))
	}
}

// done returns the messages built, every tool call answered.
func (b *messageBuilder) done() []model.Message {
	b.flush()
	return answerEveryCall(b.msgs)
}

// answerEveryCall gives each tool call without a result (its turn ended in
// between) a synthetic error result, so no provider sees half a pair.
func answerEveryCall(msgs []model.Message) []model.Message {
	answered := map[string]bool{}
	for _, m := range msgs {
		if m.Role == model.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	out := make([]model.Message, 0, len(msgs))
	for i := 0; i < len(msgs); {
		m := msgs[i]
		out = append(out, m)
		i++
		if m.Role != model.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		for i < len(msgs) && msgs[i].Role == model.RoleTool {
			out = append(out, msgs[i])
			i++
		}
		for _, call := range m.ToolCalls {
			if !answered[call.ID] {
				out = append(out, model.Message{Role: model.RoleTool, ToolCallID: call.ID, ToolError: true,
					Content: `{"error":{"code":"cancelled","message":"the turn ended before this tool returned"}}`})
			}
		}
	}
	return out
}

func toolMessage(v protocol.ToolResultPayload) model.Message {
	m := model.Message{Role: model.RoleTool, ToolCallID: v.CallID}
	if v.OK {
		m.Content = string(v.Result)
	} else {
		b, _ := protocol.Marshal(map[string]any{"error": v.Error})
		m.Content, m.ToolError = string(b), true
	}
	return m
}

// contextRecord is what a turn's context_json holds: the snapshot the
// operator submitted and, once compiled, the model context receipt.
type contextRecord struct {
	Snapshot protocol.ContextSnapshot `json:"snapshot"`
	// Client is the kind of client that submitted the turn ("": the
	// cockpit): what the model is told it can show, and which tools it gets.
	Client  protocol.ClientKind `json:"client,omitempty"`
	Receipt *receipt            `json:"receipt,omitempty"`
	// Agent, set for a turn an outside agent submitted (agents.go), is the
	// one command tool call the turn makes instead of asking a model.
	Agent *agentCall `json:"agent,omitempty"`
}

// agentCall is the turn's agent command, nil for a model's turn.
func (o *owner) agentCall() *agentCall {
	var rec contextRecord
	if protocol.Unmarshal(o.turn.ContextJSON, &rec) != nil {
		return nil
	}
	return rec.Agent
}

// agentCall is the command tool call an agent's turn makes.
type agentCall struct {
	CallID    string         `json:"callId"`
	Tool      string         `json:"tool"`
	Arguments jsontext.Value `json:"arguments"`
	Client    string         `json:"client"`
}
