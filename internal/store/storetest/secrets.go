package storetest

import (
	"strings"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// storedSecret is a token an older daemon kept verbatim (made up; the shape
// of a GitHub personal access token). searchable is a word of it the
// search index would find.
const (
	storedSecret = "ghp_Zq9aZ8bY7cX6dW5eV4fU3gT2hS1iR0jQ9kP8"
	searchable   = "ghp_Zq9aZ8bY7cX6dW5eV4fU3gT2hS1iR0jQ9kP8"
)

// testScrubSecrets: secrets kept in a title, an instruction, text frames
// and so the search index are counted by a dry run, hidden by an applied
// one (audited, in one transaction), and found no more after it.
func testScrubSecrets(t *testing.T, f *fixture) {
	sc, ok := f.s.(store.SecretScrubber)
	if !ok {
		t.Fatalf("%T does not scrub secrets", f.s)
	}
	c, err := f.s.CreateConversation(f.ctx, store.CreateConversationParams{ID: newID(), Title: ptr("deploy with " + storedSecret), Now: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	p := f.submitParams(c.ID, c.LastSequence())
	p.Instruction = "use " + storedSecret + " to push"
	tr, _, err := f.s.SubmitTurn(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.StartTurn(f.ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: f.tick()}); err != nil {
		t.Fatal(err)
	}
	f.append(c.ID, tr.RequestID, protocol.TextPayload{Content: "Pushed with " + storedSecret + ".", Format: "markdown", Role: protocol.RoleAssistant})
	f.finish(tr.RequestID, store.TurnCompleted, nil)

	dry, err := sc.ScrubSecrets(f.ctx, store.ScrubSecretsParams{})
	if err != nil {
		t.Fatal(err)
	}
	// The title, the instruction, two frames (the instruction's and the
	// answer's) and the search documents of the title and the turn.
	if dry.Rows < 6 || dry.Redacted {
		t.Fatalf("dry run: %+v", dry)
	}
	if got := f.turn(tr.RequestID).Instruction; !strings.Contains(got, storedSecret) {
		t.Fatalf("a dry run changed the instruction: %q", got)
	}
	now := f.tick()
	rep, err := sc.ScrubSecrets(f.ctx, store.ScrubSecretsParams{Apply: true,
		Audit: &store.AppendAdminEventParams{Actor: "studio_cli", Action: "studio.system.secrets_redacted", Now: now}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Redacted || rep.Rows != dry.Rows {
		t.Fatalf("applied: %+v, dry run %+v", rep, dry)
	}
	if got := f.turn(tr.RequestID).Instruction; strings.Contains(got, storedSecret) || !strings.Contains(got, "[redacted]") {
		t.Fatalf("instruction %q", got)
	}
	if got := f.get(c.ID).Title; got == nil || strings.Contains(*got, storedSecret) {
		t.Fatalf("title %v", got)
	}
	for _, fr := range f.frames(c.ID) {
		if b, _ := protocol.Marshal(fr.Payload); strings.Contains(string(b), storedSecret) {
			t.Fatalf("frame %d: %s", fr.Sequence, b)
		}
	}
	found, err := f.s.ListConversations(f.ctx, store.ListConversationsParams{Terms: []string{searchable}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 0 {
		t.Fatalf("the search index still finds the secret: %d conversations", len(found))
	}
	events, err := f.s.ListAdminEvents(f.ctx, store.ListAdminEventsParams{Action: "studio.system.secrets_redacted", Limit: 5})
	if err != nil || len(events) != 1 {
		t.Fatalf("audit: %v %v", events, err)
	}
	again, err := sc.ScrubSecrets(f.ctx, store.ScrubSecretsParams{})
	if err != nil || again.Rows != 0 {
		t.Fatalf("after the scrub: %+v %v", again, err)
	}
}
