package httpapi_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// Conversation history through the HTTP API: fork, search and pin, restore, the model
// choice, the live view and amending a proposal, on a real daemon.

func (h *harness) turn(convID, instruction string) []protocol.Frame {
	h.t.Helper()
	acc := h.submit(convID, instruction)
	return h.waitDone(convID, acc.RequestID)
}

func TestForkThroughAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	src := h.conversation()
	first := h.turn(src.ID, "one")
	second := h.turn(src.ID, "two")
	boundary := first[len(first)-1].Sequence

	var page protocol.ConversationPage
	status := h.raw(http.MethodPost, "/api/operator/conversations/"+src.ID+"/fork", `{"upToSequence":`+itoa(boundary)+`,"title":"what if"}`, &page)
	if status != http.StatusCreated {
		t.Fatalf("fork status %d", status)
	}
	fork := page.Conversation
	if fork.ForkedFrom == nil || fork.ForkedFrom.ConversationID != src.ID || fork.ForkedFrom.Sequence != boundary ||
		fork.ForkedFrom.CopiedThrough != boundary || *fork.Title != "what if" || fork.LastSequence != boundary {
		t.Fatalf("fork = %+v %+v", fork, fork.ForkedFrom)
	}
	if int64(len(page.Frames)) != boundary || page.Frames[0].Sequence != 1 || page.Frames[0].ConversationID != fork.ID {
		t.Fatalf("fork frames = %d, first %+v", len(page.Frames), page.Frames[0])
	}
	// The fork takes turns of its own, after its copy.
	// (Counted from the turn's own frames: how many text frames a reply
	// takes depends on the text coalescing's timing.)
	third := h.turn(fork.ID, "three")
	if got := h.allFrames(fork.ID); int64(len(got)) != boundary+int64(len(third)) || third[0].Sequence != boundary+1 {
		t.Fatalf("fork after a turn has %d frames, its turn from %d; want %d copied and the turn's %d after them",
			len(got), third[0].Sequence, boundary, len(third))
	}
	// An inner sequence is refused with the nearest boundaries.
	_, err := h.client.ForkConversation(h.ctx(), src.ID, protocol.ForkRequest{UpToSequence: ptr(boundary + 1)})
	pe := wantCode(t, err, protocol.Validation)
	if pe.Details["nearestBefore"] != float64(boundary) || pe.Details["nearestAfter"] != float64(second[len(second)-1].Sequence) {
		t.Fatalf("details = %v", pe.Details)
	}
	_, err = h.client.ForkConversation(h.ctx(), src.ID, protocol.ForkRequest{UpToSequence: ptr[int64](-1)})
	wantCode(t, err, protocol.Validation)
	// The CLI's default: after the newest complete turn.
	all, err := h.client.ForkConversation(h.ctx(), src.ID, protocol.ForkRequest{})
	if err != nil || all.Conversation.LastSequence != second[len(second)-1].Sequence {
		t.Fatalf("default fork: %+v %v", all.Conversation, err)
	}
	if _, err := h.client.DeleteConversation(h.ctx(), src.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.client.ForkConversation(h.ctx(), src.ID, protocol.ForkRequest{})
	wantCode(t, err, protocol.NotFound)
}

// raw sends body (JSON text) and decodes the answer into out; it returns the status.
func (h *harness) raw(method, path, body string, out any) int {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.ctx(), method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if out != nil && resp.StatusCode < 300 {
		if err := protocol.Unmarshal([]byte(b.String()), out); err != nil {
			h.t.Fatalf("decode %s: %v", b.String(), err)
		}
	}
	return resp.StatusCode
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestForkedProposalIsHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript})
	src := h.conversation()
	acc, prop := h.proposed(src.ID)
	// Ended before anyone decided: the proposal is cancelled with its turn.
	if _, err := h.client.Cancel(h.ctx(), src.ID, acc.RequestID); err != nil {
		t.Fatal(err)
	}
	h.waitDone(src.ID, acc.RequestID)
	page, err := h.client.ForkConversation(h.ctx(), src.ID, protocol.ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	fork := page.Conversation
	var copied bool
	for _, f := range h.allFrames(fork.ID) {
		if p, ok := f.Payload.(protocol.ProposalPayload); ok && p.Proposal.ID == prop.ID {
			copied = true
		}
	}
	if !copied {
		t.Fatal("the proposal frame was not copied")
	}
	// Nothing of it can be decided through the fork.
	_, err = h.client.Confirm(h.ctx(), fork.ID, prop.ID, confirmReq(prop))
	wantCode(t, err, protocol.NotFound)
	_, err = h.client.AmendProposal(h.ctx(), fork.ID, prop.ID, protocol.AmendProposalRequest{ExpectedCommandHash: prop.CommandHash, Command: prop.Command})
	wantCode(t, err, protocol.NotFound)
	var list struct {
		Proposals []protocol.ProposalState `json:"proposals"`
	}
	if err := h.client.Do(h.ctx(), http.MethodGet, "/api/operator/conversations/"+fork.ID+"/proposals", nil, &list); err != nil || len(list.Proposals) != 0 {
		t.Fatalf("fork proposals: %v %v", list.Proposals, err)
	}
}

func TestSearchPinRestoreThroughAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	mk := func(title string) protocol.Conversation {
		c, err := h.client.CreateConversation(h.ctx(), protocol.CreateConversationRequest{Title: ptr(title)})
		if err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
		return c
	}
	a, b, c := mk("nightly audit"), mk("release notes"), mk("weekly audit")
	h.turn(b.ID, "hello there") // the greeting script answers "Hello from the Studio operator…"
	if _, err := h.client.UpdateConversation(h.ctx(), a.ID, protocol.UpdateConversationRequest{Pinned: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	names := func(l protocol.ConversationList) []string {
		var out []string
		for _, x := range l.Conversations {
			out = append(out, *x.Title)
		}
		return out
	}
	l, err := h.client.ListConversations(h.ctx(), "", "", 10)
	if err != nil || !slices.Equal(names(l), []string{"nightly audit", "weekly audit", "release notes"}) || !l.Conversations[0].Pinned {
		t.Fatalf("list = %v %v", names(l), err)
	}
	for q, want := range map[string][]string{
		"audit":         {"nightly audit", "weekly audit"},
		"AUDIT, weekly": {"weekly audit"},
		"operat":        {"release notes"}, // the answer's text, by prefix
		"hello there":   {"release notes"}, // the instruction
		"\"*) OR (":     {},                // no query syntax reaches the engine
		"nothing":       {},
	} {
		got, err := h.client.SearchConversations(h.ctx(), q, "")
		if err != nil {
			t.Fatalf("q %q: %v", q, err)
		}
		if n := names(got); !slices.Equal(n, want) && !(len(n) == 0 && len(want) == 0) {
			t.Errorf("q %q = %v, want %v", q, n, want)
		}
	}
	_, err = h.client.SearchConversations(h.ctx(), strings.Repeat("x", 201), "")
	wantCode(t, err, protocol.Validation)

	// Delete, list the recoverable, restore (audited), and the window's end.
	for _, x := range []protocol.Conversation{b, c} {
		if _, err := h.client.DeleteConversation(h.ctx(), x.ID); err != nil {
			t.Fatal(err)
		}
	}
	del, err := h.client.ListConversations(h.ctx(), "deleted", "", 10)
	if err != nil || len(del.Conversations) != 2 || del.Conversations[0].DeletedAt == nil {
		t.Fatalf("deleted = %+v %v", del, err)
	}
	if got, _ := h.client.SearchConversations(h.ctx(), "release", "deleted"); len(got.Conversations) != 1 {
		t.Fatalf("search among deleted: %v", names(got))
	}
	restored, err := h.client.RestoreConversation(h.ctx(), b.ID)
	if err != nil || restored.Status != "active" || restored.DeletedAt != nil {
		t.Fatalf("restore = %+v %v", restored, err)
	}
	if frames := h.allFrames(b.ID); len(frames) < 3 {
		t.Fatalf("restored frames: %d", len(frames))
	}
	rows, err := h.store.ListAdminEvents(h.ctx(), store.ListAdminEventsParams{Action: conversations.RestoreAction, TargetID: b.ID})
	if err != nil || len(rows) != 1 || rows[0].Actor != "owner" { // the restoring principal

		t.Fatalf("restore audit: %+v %v", rows, err)
	}
	_, err = h.client.RestoreConversation(h.ctx(), b.ID)
	wantCode(t, err, protocol.Conflict)
	h.clock.Advance(conversations.DefaultRecoveryWindow + time.Hour)
	_, err = h.client.RestoreConversation(h.ctx(), c.ID)
	wantCode(t, err, protocol.NotFound)
	if del, _ := h.client.ListConversations(h.ctx(), "deleted", "", 10); len(del.Conversations) != 0 {
		t.Fatalf("past the window still listed: %v", names(del))
	}
	_, err = h.client.ListConversations(h.ctx(), "gone", "", 10)
	wantCode(t, err, protocol.Validation)
}

func scriptProvider(t *testing.T, text string) *script.Provider {
	t.Helper()
	p, err := script.New(script.Script{Turns: []script.Turn{{Steps: []script.Step{{Text: ptr(text)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestModelChoiceThroughAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{models: []coordinator.Model{
		{Name: "first", Kind: "script", Provider: scriptProvider(t, "from the first model")},
		{Name: "second", Kind: "script", ModelName: "s2", ContextTokens: 8192, Provider: scriptProvider(t, "from the second model")},
	}})
	ml, err := h.client.Models(h.ctx())
	if err != nil || ml.Default != "first" || len(ml.Models) != 2 || !ml.Models[0].Default || !ml.Models[1].Reachable ||
		ml.Models[1].ContextLimits.ContextTokens != 8192 || ml.Models[1].ContextLimits.HistoryFrames == 0 {
		t.Fatalf("models = %+v %v", ml, err)
	}
	c := h.conversation()
	answer := func() (string, store.Turn) {
		acc := h.submit(c.ID, "hi")
		var text string
		for _, f := range h.waitDone(c.ID, acc.RequestID) {
			if p, ok := f.Payload.(protocol.TextPayload); ok && p.Role == protocol.RoleAssistant {
				text += p.Content
			}
		}
		tr, err := h.store.GetTurn(h.ctx(), acc.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		return text, tr
	}
	receiptModel := func(tr store.Turn) string {
		var rec struct {
			Receipt struct {
				Model    string `json:"model"`
				Provider string `json:"provider"`
			} `json:"receipt"`
		}
		if err := jsonUnmarshalLoose(tr.ContextJSON, &rec); err != nil {
			t.Fatal(err)
		}
		return rec.Receipt.Model + "/" + rec.Receipt.Provider
	}
	if text, tr := answer(); text != "from the first model" || receiptModel(tr) != "first/script" {
		t.Fatalf("default turn: %q %s", text, receiptModel(tr))
	}
	_, err = h.client.UpdateConversation(h.ctx(), c.ID, protocol.UpdateConversationRequest{Model: ptr("third")})
	pe := wantCode(t, err, protocol.Validation)
	if !strings.Contains(pe.Message, "first, second") {
		t.Fatalf("message %q", pe.Message)
	}
	conv, err := h.client.UpdateConversation(h.ctx(), c.ID, protocol.UpdateConversationRequest{Model: ptr("second")})
	if err != nil || conv.Model == nil || *conv.Model != "second" {
		t.Fatalf("patch model: %+v %v", conv, err)
	}
	if text, tr := answer(); text != "from the second model" || receiptModel(tr) != "second/script" {
		t.Fatalf("switched turn: %q %s", text, receiptModel(tr))
	}
	if _, err := h.client.UpdateConversation(h.ctx(), c.ID, protocol.UpdateConversationRequest{Model: ptr("")}); err != nil {
		t.Fatal(err)
	}
	if text, _ := answer(); text != "from the first model" {
		t.Fatalf("back to the default: %q", text)
	}
}

// jsonUnmarshalLoose decodes a stored record keeping only the fields asked for.
func jsonUnmarshalLoose(b []byte, v any) error {
	return json.Unmarshal(b, v)
}

// viewScript: a proposal parks the turn (so the test can report a view
// while it waits, deterministically), then get_current_view.
var viewScript = script.Script{Turns: []script.Turn{{Steps: []script.Step{
	{Tool: ptr("launch_playbook"), Arguments: jsontext.Value(`{"playbook":"audit-repo","input":"x","args":{"repo":"x"}}`)},
	{Tool: ptr("get_current_view"), Arguments: jsontext.Value(`{}`)},
	{Text: ptr("seen")},
}}}}

func TestLiveViewThroughAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &viewScript})
	c := h.conversation()
	report := func(space, route string, at float64) protocol.ViewAccepted {
		t.Helper()
		a, err := h.client.ReportView(h.ctx(), c.ID, protocol.ViewReport{ContextSnapshot: protocol.ContextSnapshot{Space: space, Route: route}, ObservedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// turn runs a turn; while its proposal waits, during runs; then the
	// proposal is denied and the turn goes on to get_current_view.
	turn := func(during func()) map[string]any {
		t.Helper()
		acc, prop := h.proposed(c.ID)
		during()
		if _, err := h.client.Deny(h.ctx(), c.ID, prop.ID); err != nil {
			t.Fatal(err)
		}
		for _, f := range h.waitDone(c.ID, acc.RequestID) {
			if p, ok := f.Payload.(protocol.ToolResultPayload); ok && p.OK {
				var out map[string]any
				if err := protocol.Unmarshal(p.Result, &out); err != nil {
					t.Fatal(err)
				}
				return out
			}
		}
		t.Fatal("no get_current_view result")
		return nil
	}
	// No report: the turn's snapshot.
	if v := turn(func() {}); v["source"] != "snapshot" || v["space"] != "mission" {
		t.Fatalf("without a report: %v", v)
	}
	// Reports while the turn waits: the freshest wins; an older one, or
	// one from a clock ahead of the daemon's, does not displace it.
	var at float64
	v := turn(func() {
		h.clock.Advance(2 * time.Second)
		at = protocol.Timestamp(h.clock.Now())
		if a := report("history", "/history", at-1); !a.Accepted {
			t.Fatalf("first report: %+v", a)
		}
		if a := report("schedules", "/schedules", at); !a.Accepted {
			t.Fatalf("newer report: %+v", a)
		}
		if a := report("library", "/library", at-0.5); a.Accepted || a.ObservedAt != at {
			t.Fatalf("an older report: %+v", a)
		}
		if a := report("system", "/system", at+3600); a.Accepted || a.ObservedAt != at {
			t.Fatalf("a report from the future: %+v", a)
		}
	})
	if v["source"] != "report" || v["space"] != "schedules" || v["observedAt"] != at {
		t.Fatalf("with a report during the turn: %v", v)
	}
	// The next turn's snapshot is newer than that report.
	if v := turn(func() {}); v["source"] != "snapshot" {
		t.Fatalf("a report from before the turn: %v", v)
	}
	_, err := h.client.ReportView(h.ctx(), c.ID, protocol.ViewReport{ContextSnapshot: protocol.ContextSnapshot{Space: "nowhere", Route: "/"}, ObservedAt: at})
	wantCode(t, err, protocol.Validation)
	_, err = h.client.ReportView(h.ctx(), c.ID, protocol.ViewReport{ContextSnapshot: protocol.ContextSnapshot{Space: "mission", Route: "/"}})
	wantCode(t, err, protocol.Validation)
}

func TestAmendThroughAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript})
	c := h.conversation()
	acc, prop := h.proposed(c.ID)
	amended := jsontext.Value(`{"playbook":"audit-repo","input":"repo y","args":{"repo":"y"}}`)

	// Refused: a stale hash, a command that could not run, the same command.
	_, err := h.client.AmendProposal(h.ctx(), c.ID, prop.ID, protocol.AmendProposalRequest{ExpectedCommandHash: "nope", Command: amended})
	wantCode(t, err, protocol.Conflict)
	_, err = h.client.AmendProposal(h.ctx(), c.ID, prop.ID, protocol.AmendProposalRequest{ExpectedCommandHash: prop.CommandHash,
		Command: jsontext.Value(`{"playbook":"no-such-playbook","input":"x"}`)})
	wantCode(t, err, protocol.NotFound)
	_, err = h.client.AmendProposal(h.ctx(), c.ID, prop.ID, protocol.AmendProposalRequest{ExpectedCommandHash: prop.CommandHash,
		Command: jsontext.Value(`{"playbook":"audit-repo","bogus":1}`)})
	wantCode(t, err, protocol.Validation)
	_, err = h.client.AmendProposal(h.ctx(), c.ID, prop.ID, protocol.AmendProposalRequest{ExpectedCommandHash: prop.CommandHash, Command: prop.Command})
	wantCode(t, err, protocol.Validation)
	if p, _ := h.client.Proposal(h.ctx(), prop.ID); p.Status != "pending" {
		t.Fatalf("a refused amendment changed the proposal: %s", p.Status)
	}

	np, err := h.client.AmendProposal(h.ctx(), c.ID, prop.ID, protocol.AmendProposalRequest{ExpectedCommandHash: prop.CommandHash, Command: amended})
	if err != nil {
		t.Fatal(err)
	}
	if np.ID == prop.ID || np.CommandHash == prop.CommandHash || np.IdempotencyKey == prop.IdempotencyKey || np.Amends == nil || *np.Amends != prop.ID ||
		np.Status != "pending" || np.RequestID != acc.RequestID {
		t.Fatalf("amended = %+v", np)
	}
	orig, _ := h.client.Proposal(h.ctx(), prop.ID)
	if orig.Status != "cancelled" || orig.ErrorCode == nil || *orig.ErrorCode != protocol.ReasonAmended {
		t.Fatalf("original = %+v", orig)
	}
	_, err = h.client.Confirm(h.ctx(), c.ID, prop.ID, confirmReq(prop))
	if err != nil {
		t.Fatal(err) // a settled proposal answers its state
	}
	_, err = h.client.AmendProposal(h.ctx(), c.ID, prop.ID, protocol.AmendProposalRequest{ExpectedCommandHash: prop.CommandHash, Command: amended})
	wantCode(t, err, protocol.Conflict)

	res, err := h.client.Confirm(h.ctx(), c.ID, np.ID, confirmReq(np.CommandProposal))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm amended: %+v %v", res, err)
	}
	frames := h.waitDone(c.ID, acc.RequestID)
	var results []protocol.ToolResultPayload
	var states []string
	for _, f := range frames {
		switch p := f.Payload.(type) {
		case protocol.ToolResultPayload:
			results = append(results, p)
		case protocol.ConfirmationPayload:
			states = append(states, string(p.State))
		}
	}
	if !slices.Equal(states, []string{"required", "amended", "required", "confirmed", "executed"}) {
		t.Fatalf("confirmation states = %v", states)
	}
	// The model's one call gets one result: what ran, and that it was amended.
	if len(results) != 1 || results[0].CallID == "" || !results[0].OK {
		t.Fatalf("tool results = %+v", results)
	}
	var told map[string]any
	if err := protocol.Unmarshal(results[0].Result, &told); err != nil {
		t.Fatal(err)
	}
	if told["amendedFrom"] != prop.ID || told["executedCommand"].(map[string]any)["input"] != "repo y" {
		t.Fatalf("the model was told %v", told)
	}
	// Audit: the original's D8 row (denied, error_code amended) and the
	// row linking it to its replacement; the new one confirmed and executed.
	if d := h.auditDecisions(prop.ID); !slices.Equal(d, []string{"denied"}) {
		t.Fatalf("original's audit = %v", d)
	}
	h.auditTrail(prop.ID) // the exact D8 key set
	links, err := h.store.ListAdminEvents(h.ctx(), store.ListAdminEventsParams{Action: protocol.AmendAction, TargetID: prop.ID})
	if err != nil || len(links) != 1 {
		t.Fatalf("amend link rows: %v %v", links, err)
	}
	var link protocol.AmendAudit
	if err := protocol.Unmarshal(links[0].Details, &link); err != nil || link.AmendedBy != np.ID || link.CommandHashAfter != np.CommandHash {
		t.Fatalf("amend link = %+v %v", link, err)
	}
	if d := h.auditDecisions(np.ID); !slices.Equal(d, []string{"confirmed", "executed"}) {
		t.Fatalf("amended's audit = %v", d)
	}
	runs, err := h.app.ListRuns(h.ctx(), studio.RunQuery{})
	if err != nil || len(runs.Runs) != 1 || runs.Runs[0].Input != "repo y" {
		t.Fatalf("runs = %+v %v", runs.Runs, err)
	}
}

// auditDecisions are a proposal's audit decisions, oldest first, checking
// the links between an amended proposal and its replacement.
func (h *harness) auditDecisions(proposalID string) []string {
	h.t.Helper()
	rows, err := h.store.ListAdminEvents(h.ctx(), store.ListAdminEventsParams{Action: protocol.AuditAction, TargetID: proposalID})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for i := len(rows) - 1; i >= 0; i-- {
		var d protocol.CommandAudit
		if err := protocol.Unmarshal(rows[i].Details, &d); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, string(d.Decision))
	}
	return out
}

func TestNoConversationToolsForTheModel(t *testing.T) {
	t.Parallel()
	// A hostile model that tries to fork, restore,
	// pin or re-route conversations finds no tool for it, and its calls are
	// validation results that change nothing.
	calls := []string{"fork_conversation", "restore_conversation", "pin_conversation", "set_conversation_model", "amend_proposal", "report_view"}
	h := newHarness(t, harnessOpts{script: &script.Script{Turns: []script.Turn{{Steps: func() []script.Step {
		var steps []script.Step
		for _, c := range calls {
			steps = append(steps, script.Step{Tool: ptr(c), Arguments: jsontext.Value(`{"conversationId":"x"}`)})
		}
		return append(steps, script.Step{Text: ptr("done")})
	}()}}}})
	var catalog struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := h.client.Do(h.ctx(), http.MethodGet, "/api/operator/tools", nil, &catalog); err != nil {
		t.Fatal(err)
	}
	if len(catalog.Tools) < 10 {
		t.Fatalf("catalog of %d tools", len(catalog.Tools))
	}
	for _, tool := range catalog.Tools {
		id, _ := tool["id"].(string)
		for _, word := range []string{"fork", "restore", "conversation", "amend", "pin", "view_report"} {
			if strings.Contains(id, word) {
				t.Errorf("the catalog offers %s to the model", id)
			}
		}
	}
	c := h.conversation()
	other := h.conversation()
	if _, err := h.client.DeleteConversation(h.ctx(), other.ID); err != nil {
		t.Fatal(err)
	}
	frames := h.turn(c.ID, "fork and restore everything")
	var refused int
	for _, f := range frames {
		if p, ok := f.Payload.(protocol.ToolResultPayload); ok {
			if p.OK || p.Error.Code != protocol.Validation {
				t.Errorf("tool result = %+v", p)
			}
			refused++
		}
	}
	if refused != len(calls) {
		t.Fatalf("refused %d of %d calls", refused, len(calls))
	}
	l, err := h.client.ListConversations(h.ctx(), "", "", 10)
	if err != nil || len(l.Conversations) != 1 {
		t.Fatalf("conversations after the turn: %+v %v", l.Conversations, err)
	}
	if del, _ := h.client.ListConversations(h.ctx(), "deleted", "", 10); len(del.Conversations) != 1 {
		t.Fatal("the deleted conversation was restored")
	}
}

func TestAmendRacesConfirmAndCancel(t *testing.T) {
	t.Parallel()
	// Amend, confirm and cancel of one proposal at the same instant: the
	// turn's owner takes them one at a time, so exactly one of them decides
	// the original, and nothing runs twice or without its audit row.
	for i := range 5 {
		h := newHarness(t, harnessOpts{script: &proposalScript})
		c := h.conversation()
		acc, prop := h.proposed(c.ID)
		amended := jsontext.Value(`{"playbook":"audit-repo","input":"repo y","args":{"repo":"y"}}`)
		var wg sync.WaitGroup
		var amendErr, confirmErr error
		var confirmRes protocol.ProposalResult
		wg.Add(3)
		go func() {
			defer wg.Done()
			_, amendErr = h.client.AmendProposal(h.ctx(), c.ID, prop.ID, protocol.AmendProposalRequest{ExpectedCommandHash: prop.CommandHash, Command: amended})
		}()
		go func() {
			defer wg.Done()
			confirmRes, confirmErr = h.client.Confirm(h.ctx(), c.ID, prop.ID, confirmReq(prop))
		}()
		go func() {
			defer wg.Done()
			if i%2 == 1 {
				_, _ = h.client.Cancel(h.ctx(), c.ID, acc.RequestID)
			}
		}()
		wg.Wait()
		if confirmErr != nil {
			t.Fatalf("confirm: %v", confirmErr)
		}
		orig, _ := h.client.Proposal(h.ctx(), prop.ID)
		switch {
		case amendErr == nil:
			if orig.ErrorCode == nil || *orig.ErrorCode != protocol.ReasonAmended || confirmRes.Status != protocol.ResultCancelled {
				t.Fatalf("amend won, but the original is %s (%v) and confirm answered %s", orig.Status, orig.ErrorCode, confirmRes.Status)
			}
		case protocol.IsCode(amendErr, protocol.Conflict):
			if orig.Status == "pending" {
				t.Fatal("amend refused, the original still pending")
			}
		default:
			t.Fatalf("amend: %v", amendErr)
		}
		if i%2 == 1 {
			h.waitDone(c.ID, acc.RequestID)
		}
		for _, id := range []string{prop.ID} {
			d := h.auditDecisions(id)
			if len(d) == 0 {
				t.Fatalf("no audit row for %s", id)
			}
			if slices.Contains(d, "executed") && d[0] != "confirmed" {
				t.Fatalf("executed without a confirmed row first: %v", d)
			}
		}
		runs, _ := h.app.ListRuns(h.ctx(), studio.RunQuery{})
		if len(runs.Runs) > 1 {
			t.Fatalf("%d runs launched", len(runs.Runs))
		}
	}
}
