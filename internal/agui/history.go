package agui

import "github.com/studio/operator/internal/protocol"

// history folds a conversation's frames into AG-UI messages, as a client
// applying the runs' events would hold them (MESSAGES_SNAPSHOT): the same
// mapper makes the events, so ids agree with the runs'.
type history struct {
	m    *mapper
	msgs []map[string]any
	at   map[string]int // a message's index, by id
}

func newHistory(m *mapper) *history {
	m.users = true
	return &history{m: m, at: map[string]int{}}
}

// add folds one frame in.
func (h *history) add(f protocol.Frame) {
	evs, _ := h.m.frame(f)
	for _, e := range evs {
		h.apply(e)
	}
}

func (h *history) message(id string) map[string]any {
	if i, ok := h.at[id]; ok {
		return h.msgs[i]
	}
	return nil
}

func (h *history) put(id string, msg map[string]any) {
	if i, ok := h.at[id]; ok {
		h.msgs[i] = msg
		return
	}
	h.at[id] = len(h.msgs)
	h.msgs = append(h.msgs, msg)
}

func (h *history) apply(e Event) {
	f := e.Fields
	str := func(k string) string { s, _ := f[k].(string); return s }
	switch e.Type {
	case TextMessageStart:
		if h.message(str("messageId")) == nil {
			h.put(str("messageId"), map[string]any{"id": str("messageId"), "role": str("role"), "content": ""})
		}
	case TextMessageContent:
		if msg := h.message(str("messageId")); msg != nil {
			msg["content"] = msg["content"].(string) + str("delta")
		}
	case ToolCallStart:
		id := str("toolCallId")
		h.put(id, map[string]any{"id": id, "role": "assistant", "toolCalls": []map[string]any{{"id": id, "type": "function",
			"function": map[string]any{"name": str("toolCallName"), "arguments": ""}}}})
	case ToolCallArgs:
		if msg := h.message(str("toolCallId")); msg != nil {
			fn := msg["toolCalls"].([]map[string]any)[0]["function"].(map[string]any)
			fn["arguments"] = fn["arguments"].(string) + str("delta")
		}
	case ToolCallResult:
		h.put(str("messageId"), map[string]any{"id": str("messageId"), "role": "tool", "toolCallId": str("toolCallId"), "content": str("content")})
	case ActivitySnapshot:
		h.put(str("messageId"), map[string]any{"id": str("messageId"), "role": "activity", "activityType": str("activityType"), "content": f["content"]})
	}
}

// snapshot is the MESSAGES_SNAPSHOT event of the history.
func (h *history) snapshot() Event {
	msgs := h.msgs
	if msgs == nil {
		msgs = []map[string]any{}
	}
	return ev(MessagesSnapshot, "messages", msgs)
}
