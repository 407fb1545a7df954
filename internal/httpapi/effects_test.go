package httpapi_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
)

// effectScript: "go fleet" navigates to the failed runs; "theme" switches to dark.
var effectScript = script.Script{Turns: []script.Turn{
	{Match: "go fleet", Steps: []script.Step{
		{Tool: ptr("navigate"), Arguments: jsontext.Value(`{"space":"mission","params":{"view":"fleet","status":"failed"}}`)},
		{Text: ptr("I asked the cockpit to show the failed runs.")},
	}},
	{Match: "bad nav", Steps: []script.Step{
		{Tool: ptr("navigate"), Arguments: jsontext.Value(`{"space":"mission","params":{"status":"exploded"}}`)},
		{Text: ptr("That did not work.")},
	}},
	{Steps: []script.Step{{Text: ptr("ok")}}},
}}

// emitted runs a turn and returns its ui_command payloads and all its frames.
func (h *harness) emitted(convID, instruction string) ([]protocol.UICommandPayload, []protocol.Frame) {
	h.t.Helper()
	acc := h.submit(convID, instruction)
	frames := h.waitDone(convID, acc.RequestID)
	var effects []protocol.UICommandPayload
	for _, f := range frames {
		if p, ok := f.Payload.(protocol.UICommandPayload); ok {
			effects = append(effects, p)
		}
	}
	return effects, frames
}

func TestEffectEmissionAndAcknowledgement(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &effectScript})
	ctx := h.ctx()
	c := h.conversation()
	effects, frames := h.emitted(c.ID, "go fleet")
	if len(effects) != 1 {
		t.Fatalf("effects %+v", effects)
	}
	// tool_call (draft), ui_command, tool_result saying requested, then text.
	var types []protocol.FrameType
	for _, f := range frames {
		types = append(types, f.Type)
	}
	want := []protocol.FrameType{"text", "tool_call", "ui_command", "tool_result", "text", "done"}
	if len(types) != len(want) {
		t.Fatalf("frame types %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("frame types %v, want %v", types, want)
		}
	}
	if m := frames[1].Payload.(protocol.ToolCallPayload).Mode; m != "draft" {
		t.Fatalf("navigate tool_call mode %q", m)
	}
	res := frames[3].Payload.(protocol.ToolResultPayload)
	if !res.OK || !containsAll(string(res.Result), `"status":"requested"`, effects[0].EffectID) {
		t.Fatalf("tool result %s", res.Result)
	}
	eff := effects[0]
	if eff.ExpiresAt != protocol.Timestamp(h.clock.Now().Add(10*time.Minute)) {
		t.Fatalf("expiresAt %v", eff.ExpiresAt)
	}
	// The row exists, pending, until the client says otherwise.
	row, err := h.store.GetEffect(ctx, eff.EffectID)
	if err != nil || row.Status != "pending" || row.RequestID != frames[0].RequestID {
		t.Fatalf("effect row %+v %v", row, err)
	}

	ack := func(req protocol.AckEffectRequest) (protocol.EffectState, error) {
		return h.client.AckEffect(ctx, c.ID, eff.EffectID, req)
	}
	// Applied needs the matching route; a wrong route is a validation error
	// and changes nothing.
	_, err = ack(protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/history?status=failed")})
	wantCode(t, err, protocol.Validation)
	_, err = ack(protocol.AckEffectRequest{Status: "applied"})
	wantCode(t, err, protocol.Validation)
	_, err = ack(protocol.AckEffectRequest{Status: "rejected"})
	wantCode(t, err, protocol.Validation)
	_, err = ack(protocol.AckEffectRequest{Status: "rejected", RejectionCode: ptr("because")})
	wantCode(t, err, protocol.Validation)
	_, err = ack(protocol.AckEffectRequest{Status: "done"})
	wantCode(t, err, protocol.Validation)
	if row, _ := h.store.GetEffect(ctx, eff.EffectID); row.Status != "pending" {
		t.Fatalf("refused acks changed the effect: %s", row.Status)
	}
	st, err := ack(protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/?view=fleet&status=failed")})
	if err != nil || st.Status != "applied" || *st.ClientRoute != "/?view=fleet&status=failed" || st.AcknowledgedAt == nil {
		t.Fatalf("applied: %+v %v", st, err)
	}
	// An identical repeat answers the stored acknowledgement.
	h.clock.Advance(time.Second)
	again, err := ack(protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/?view=fleet&status=failed")})
	if err != nil || *again.AcknowledgedAt != *st.AcknowledgedAt {
		t.Fatalf("repeat: %+v %v", again, err)
	}
	// A contradictory one is a conflict.
	_, err = ack(protocol.AckEffectRequest{Status: "rejected", RejectionCode: ptr("not_visible")})
	wantCode(t, err, protocol.Conflict)
	_, err = ack(protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/?status=failed&view=fleet&q=x")})
	wantCode(t, err, protocol.Validation)
	// Unknown effect, effect of another conversation.
	_, err = h.client.AckEffect(ctx, c.ID, "6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1", protocol.AckEffectRequest{Status: "rejected", RejectionCode: ptr("unsupported")})
	wantCode(t, err, protocol.NotFound)
	other := h.conversation()
	_, err = h.client.AckEffect(ctx, other.ID, eff.EffectID, protocol.AckEffectRequest{Status: "rejected", RejectionCode: ptr("unsupported")})
	wantCode(t, err, protocol.NotFound)
}

func TestEffectRejectedAndExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &effectScript})
	ctx := h.ctx()

	// Rejected with a code, repeated identically.
	c := h.conversation()
	effects, _ := h.emitted(c.ID, "go fleet")
	rej := protocol.AckEffectRequest{Status: "rejected", RejectionCode: ptr("stale_context"), Detail: "the view changed"}
	if st, err := h.client.AckEffect(ctx, c.ID, effects[0].EffectID, rej); err != nil || st.Status != "rejected" || *st.RejectionCode != "stale_context" {
		t.Fatalf("rejected: %+v %v", st, err)
	}
	if _, err := h.client.AckEffect(ctx, c.ID, effects[0].EffectID, rej); err != nil {
		t.Fatalf("identical rejected repeat: %v", err)
	}

	applied := protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/?view=fleet&status=failed")}
	// Superseded by a newer turn.
	c = h.conversation()
	effects, _ = h.emitted(c.ID, "go fleet")
	h.emitted(c.ID, "anything else")
	_, err := h.client.AckEffect(ctx, c.ID, effects[0].EffectID, applied)
	wantCode(t, err, protocol.StaleContext)
	if row, _ := h.store.GetEffect(ctx, effects[0].EffectID); row.Status != "expired" {
		t.Fatalf("superseded effect is %s", row.Status)
	}
	// Still stale on a repeat, whatever is asked.
	_, err = h.client.AckEffect(ctx, c.ID, effects[0].EffectID, protocol.AckEffectRequest{Status: "rejected", RejectionCode: ptr("client_error")})
	wantCode(t, err, protocol.StaleContext)

	// Older than 10 minutes on the fake clock.
	c = h.conversation()
	effects, _ = h.emitted(c.ID, "go fleet")
	h.clock.Advance(10 * time.Minute)
	_, err = h.client.AckEffect(ctx, c.ID, effects[0].EffectID, applied)
	wantCode(t, err, protocol.StaleContext)

	// Just inside 10 minutes is fine.
	c = h.conversation()
	effects, _ = h.emitted(c.ID, "go fleet")
	h.clock.Advance(10*time.Minute - time.Second)
	if _, err := h.client.AckEffect(ctx, c.ID, effects[0].EffectID, applied); err != nil {
		t.Fatalf("ack within 10 minutes: %v", err)
	}

	// Archived conversation.
	c = h.conversation()
	effects, _ = h.emitted(c.ID, "go fleet")
	if _, err := h.client.UpdateConversation(ctx, c.ID, protocol.UpdateConversationRequest{Status: ptr("archived")}); err != nil {
		t.Fatal(err)
	}
	_, err = h.client.AckEffect(ctx, c.ID, effects[0].EffectID, applied)
	wantCode(t, err, protocol.StaleContext)
}

func TestInvalidEffectIsNeverEmitted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &effectScript})
	c := h.conversation()
	effects, frames := h.emitted(c.ID, "bad nav")
	if len(effects) != 0 {
		t.Fatalf("an invalid effect was emitted: %+v", effects)
	}
	var res protocol.ToolResultPayload
	for _, f := range frames {
		if p, ok := f.Payload.(protocol.ToolResultPayload); ok {
			res = p
		}
	}
	if res.OK || res.Error == nil || res.Error.Code != protocol.Validation {
		t.Fatalf("tool result %+v", res)
	}
	// The model continued and the turn completed.
	if d := frames[len(frames)-1].Payload.(protocol.DonePayload); d.Outcome != protocol.OutcomeCompleted {
		t.Fatalf("outcome %s", d.Outcome)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func TestRoutesAndToolsCatalog(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	var reg spaces.Registry
	if err := h.client.Do(h.ctx(), "GET", "/api/operator/routes", nil, &reg); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range reg.Spaces {
		ids = append(ids, s.ID)
		if s.ID == "system" && slices.Contains(s.Effects, "select") {
			t.Fatal("system accepts select")
		}
	}
	if !slices.Equal(ids, protocol.Spaces) || len(reg.Forms) != 3 || reg.Version != 1 {
		t.Fatalf("routes %+v", reg)
	}
	var cat struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := h.client.Do(h.ctx(), "GET", "/api/operator/tools", nil, &cat); err != nil {
		t.Fatal(err)
	}
	classes := map[string]string{}
	for _, tl := range cat.Tools {
		id, _ := tl["id"].(string)
		classes[id], _ = tl["executionClass"].(string)
		if schema, _ := tl["inputSchema"].(map[string]any); schema["type"] != "object" {
			t.Fatalf("tool %s schema %v", id, tl["inputSchema"])
		}
	}
	for id, class := range map[string]string{"list_runs": "read", "navigate": "navigate", "prefill_form": "draft",
		"launch_playbook": "execute", "delete_schedule": "mutate", "run_maintenance": "admin"} {
		if classes[id] != class {
			t.Errorf("tool %s class %q, want %q", id, classes[id], class)
		}
	}
}

func TestEffectPersistenceFailureEmitsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &effectScript})
	c := h.conversation()
	h.faults.Fail("EmitEffect", true)
	effects, frames := h.emitted(c.ID, "go fleet")
	if len(effects) != 0 {
		t.Fatalf("an unstored effect was emitted: %+v", effects)
	}
	var res protocol.ToolResultPayload
	for _, f := range frames {
		if p, ok := f.Payload.(protocol.ToolResultPayload); ok {
			res = p
		}
	}
	if res.OK || res.Error == nil || res.Error.Code != protocol.ServiceFailure || !strings.Contains(res.Error.Message, "not sent to the cockpit") {
		t.Fatalf("the model was not told: %+v", res)
	}
}

// TestEffectStateLookup: a client learns an effect's current state from the
// server before it applies a replayed effect, so it never applies one some
// client already acknowledged, and labels it truthfully.
func TestEffectStateLookup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &effectScript})
	ctx := h.ctx()
	c := h.conversation()
	effects, _ := h.emitted(c.ID, "go fleet")
	id := effects[0].EffectID
	st, err := h.client.GetEffect(ctx, c.ID, id)
	if err != nil || st.Status != "pending" || st.EffectID != id || st.AcknowledgedAt != nil {
		t.Fatalf("before any acknowledgement: %+v %v", st, err)
	}
	if _, err := h.client.AckEffect(ctx, c.ID, id, protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/?view=fleet&status=failed")}); err != nil {
		t.Fatal(err)
	}
	st, err = h.client.GetEffect(ctx, c.ID, id)
	if err != nil || st.Status != "applied" || st.ClientRoute == nil || *st.ClientRoute != "/?view=fleet&status=failed" || st.AcknowledgedAt == nil {
		t.Fatalf("after another client applied it: %+v %v", st, err)
	}

	// A pending effect a newer turn superseded reads as expired: no client
	// may apply it any more.
	effects, _ = h.emitted(c.ID, "go fleet")
	h.emitted(c.ID, "hello")
	if st, err := h.client.GetEffect(ctx, c.ID, effects[0].EffectID); err != nil || st.Status != "expired" {
		t.Fatalf("a superseded effect: %+v %v", st, err)
	}

	_, err = h.client.GetEffect(ctx, c.ID, "6f1c1c39-64b9-4b59-9d43-5bd0f1e0c2f1")
	wantCode(t, err, protocol.NotFound)
	_, err = h.client.GetEffect(ctx, h.conversation().ID, id)
	wantCode(t, err, protocol.NotFound)
}
