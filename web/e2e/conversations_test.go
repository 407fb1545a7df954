package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/studio/operator/internal/protocol"
)

// Conversations in the browser: fork from a turn, the searchable picker with
// pins and restore, switching the model between turns, and amending a
// proposal from its card.

// setSelect picks a value of a <select> as a person would (change event).
func (p *page) setSelect(sel, value string) {
	p.t.Helper()
	p.do(chromedp.SetValue(chromedp.CSS(sel), value))
	eval[bool](p, `(document.querySelector('`+sel+`').dispatchEvent(new Event('change')), true)`)
}

// waitTurnEnd waits until the dock's current turn is over and the composer ready.
func (p *page) waitTurnEnd(doneRows int) {
	p.t.Helper()
	p.waitJS(`document.querySelectorAll('.transcript .done').length >= `+itoa(doneRows)+` && !document.querySelector('.composer button[type=submit]').disabled`, "the turn to end")
}

func itoa(n int) string {
	b, _ := protocol.Marshal(n)
	return string(b)
}

func TestForkFromHere(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-launch the audit")
	p.waitJS(`document.querySelector('.proposal[data-state=required] button[data-action=deny]') !== null`, "the proposal card")
	p.click(`.proposal button[data-action=deny]`)
	p.waitTurnEnd(1)
	p.send("hello after")
	p.waitJS(`[...document.querySelectorAll('.transcript .msg.assistant')].some(m => m.innerText.includes('Audit finished'))`, "the second answer")
	p.waitTurnEnd(2)
	src := p.conversationID()

	// Fork after the first turn, from its end.
	p.click(`.transcript .done button[data-action=fork]`)
	p.waitJS(`window.studio.dock.conv && window.studio.dock.conv.id !== '`+src+`' && window.studio.dock.conv.forkedFrom !== null`, "the fork opened")
	fork := p.conversationID()
	// The list marks the conversation the dock shows: the fork.
	if got := eval[string](p, `document.querySelector('#dock-conv').value`); got != fork {
		t.Fatalf("the conversation list marks %s, the dock shows the fork %s", got, fork)
	}
	p.waitJS(`document.querySelector('.transcript .proposal') !== null && document.querySelectorAll('.transcript .done').length === 1`, "the copied turn")
	if eval[bool](p, `[...document.querySelectorAll('.transcript .msg.user')].some(m => m.innerText.includes('hello after'))`) {
		t.Fatal("the fork copied the turn after the fork point")
	}
	// The copied proposal is history: no buttons, said so.
	if !eval[bool](p, `document.querySelector('.proposal').dataset.historical === 'true' && document.querySelectorAll('.proposal button[data-action]').length === 0`) {
		t.Fatalf("the copied proposal is actionable: %s", eval[string](p, `document.querySelector('.proposal').innerText`))
	}
	if !strings.Contains(eval[string](p, `document.querySelector('.proposal').innerText`), "forked from") {
		t.Fatal("the copied proposal does not say why it cannot be decided")
	}
	if !eval[bool](p, `[...document.querySelectorAll('#dock-conv option')].some(o => o.value === '`+fork+`' && o.innerText.includes('(fork)'))`) {
		t.Fatal("the picker does not show the fork")
	}
	p.shot("dock-fork")
	ctx := ctxT(t)
	page, err := d.client.GetConversation(ctx, fork, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if f := page.Conversation.ForkedFrom; f == nil || f.ConversationID != src || f.CopiedThrough != page.LatestSequence || len(page.Frames) != int(f.CopiedThrough) {
		t.Fatalf("fork on the server = %+v, %d frames", page.Conversation, len(page.Frames))
	}
	// The fork goes on by itself.
	p.send("hello in the fork")
	p.waitTurnEnd(2)
	said := func(convID string) bool {
		for _, f := range conversationFrames(t, d, convID) {
			if tp, ok := f.Payload.(protocol.TextPayload); ok && tp.Content == "hello in the fork" {
				return true
			}
		}
		return false
	}
	if !said(fork) || said(src) {
		t.Fatal("the fork's turn is not the fork's alone")
	}
}

func TestConversationSearchPinRestore(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	ctx := ctxT(t)
	for _, title := range []string{"nightly audit", "release notes", "weekly audit"} {
		if _, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{Title: ptr(title)}); err != nil {
			t.Fatal(err)
		}
	}
	p := openPage(t, d, "/")
	p.openDock()
	options := `[...document.querySelectorAll('#dock-conv option')].map(o => o.innerText)`
	p.waitJS(options+`.length === 3`, "three conversations")
	p.do(chromedp.SendKeys(chromedp.CSS("#dock-conv-search"), "audit"))
	p.waitJS(options+`.length === 2 && `+options+`.every(t => t.includes('audit'))`, "two audits found")
	eval[bool](p, `(document.querySelector('#dock-conv-search').value = '', document.querySelector('#dock-conv-search').dispatchEvent(new Event('input')), true)`)
	p.do(chromedp.SendKeys(chromedp.CSS("#dock-conv-search"), "release"))
	p.waitJS(options+`.length === 1 && `+options+`[0].includes('release notes')`, "release notes found")
	// Open it, send a turn, and find it by its answer's text.
	id := eval[string](p, `document.querySelector('#dock-conv option').value`)
	p.setSelect("#dock-conv", id)
	p.waitJS(`window.studio.dock.conv && window.studio.dock.conv.id === '`+id+`'`, "the conversation opened")
	p.send("hello")
	p.waitTurnEnd(1)
	eval[bool](p, `(document.querySelector('#dock-conv-search').value = '', true)`)
	p.do(chromedp.SendKeys(chromedp.CSS("#dock-conv-search"), "finished"))
	p.waitJS(options+`.length === 1 && `+options+`[0].includes('release notes')`, "found by the answer's text")
	eval[bool](p, `(document.querySelector('#dock-conv-search').value = '', document.querySelector('#dock-conv-search').dispatchEvent(new Event('input')), true)`)
	p.waitJS(options+`.length === 3`, "the full list again")
	// Pin the oldest: it lists first.
	p.click(`.conv-actions button[data-action=pin]`)
	p.waitJS(options+`[0].startsWith('★ release notes')`, "the pinned conversation first")
	p.shot("dock-search-pinned")
	// Delete it, find it among the deleted, restore it.
	p.click(`.conv-actions button:nth-child(4)`)
	p.waitJS(`document.querySelector('dialog[open]') !== null`, "the delete confirmation")
	p.click(`dialog[open] button[value=ok]`)
	p.waitJS(`!`+options+`.some(t => t.includes('release notes'))`, "the deleted conversation gone")
	p.click(`#dock-conv-deleted`)
	p.waitJS(options+`.length === 1 && `+options+`[0].includes('release notes') && !document.querySelector('button[data-action=restore]').hidden`, "the deleted list")
	p.setSelect("#dock-conv", id)
	p.click(`button[data-action=restore]`)
	p.waitJS(`window.studio.dock.conv && window.studio.dock.conv.id === '`+id+`' && document.querySelectorAll('.transcript .done').length === 1`, "the restored conversation open")
	if c, err := d.client.GetConversation(ctx, id, 0, 1); err != nil || c.Conversation.Status != "active" {
		t.Fatalf("restored: %+v %v", c.Conversation, err)
	}
}

func TestModelSwitchBetweenTurns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	second := filepath.Join(dir, "second.json")
	if err := os.WriteFile(second, []byte(`{"turns":[{"steps":[{"text":"From the second model."}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, operatorScript, "--provider", "second=script:"+second)
	p := openPage(t, d, "/")
	p.openDock()
	// Default (script), script, second.
	p.waitJS(`document.querySelectorAll('#dock-model option').length === 3 && document.querySelector('#dock-model option[value=second]') !== null`, "the model picker")
	p.send("hello")
	p.waitJS(`[...document.querySelectorAll('.transcript .msg.assistant')].some(m => m.innerText.includes('Audit finished'))`, "the default model's answer")
	p.waitTurnEnd(1)
	p.setSelect("#dock-model", "second")
	p.waitJS(`window.studio.dock.conv.model === 'second' && document.querySelector('[data-model-note]').innerText.includes('second')`, "the model chosen")
	p.send("hello again")
	p.waitJS(`[...document.querySelectorAll('.transcript .msg.assistant')].some(m => m.innerText.includes('From the second model'))`, "the second model's answer")
	p.waitTurnEnd(2)
	p.shot("dock-model-switched")
	// Back to the default, and the picker survives a reload.
	p.setSelect("#dock-model", "")
	p.waitJS(`window.studio.dock.conv.model === null`, "the default again")
	c, err := d.client.GetConversation(ctxT(t), p.conversationID(), 0, 1)
	if err != nil || c.Conversation.Model != nil {
		t.Fatalf("model on the server: %+v %v", c.Conversation.Model, err)
	}
}

func TestAmendFromCard(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-launch the audit")
	p.waitJS(`document.querySelector('.proposal[data-state=required] button[data-action=amend]') !== null`, "the proposal card with Edit arguments")
	orig := eval[string](p, `document.querySelector('.proposal').dataset.proposal`)
	p.click(`.proposal button[data-action=amend]`)
	p.waitJS(`document.querySelector('dialog[open] [data-field=input]') !== null`, "the amend form")
	// The form comes from the schema: playbook required, input prefilled, args as JSON.
	if v := eval[string](p, `document.querySelector('dialog[open] [data-field=input]').value`); v != "requested from the dock" {
		t.Fatalf("input prefilled with %q", v)
	}
	if !eval[bool](p, `document.querySelector('dialog[open] [data-field=playbook]').required`) {
		t.Fatal("playbook is not required in the form")
	}
	eval[bool](p, `(() => { const i = document.querySelector('dialog[open] [data-field=input]'); i.value = 'amended in the dock'; i.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
	p.waitJS(`document.querySelector('dialog[open] [data-amend-preview]').innerText.includes('amended in the dock')`, "the preview of the amended command")
	p.shot("dock-amend-form")
	// A command the server refuses keeps the form open, saying why.
	eval[bool](p, `(() => { const i = document.querySelector('dialog[open] [data-field=playbook]'); i.value = 'no-such-playbook'; i.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
	p.click(`dialog[open] button[data-action=confirm-amended]`)
	p.waitJS(`document.querySelector('dialog[open] .error-box:not([hidden])') !== null && document.querySelector('dialog[open] .error-box').innerText.includes('not_found')`, "the refusal in the form")
	eval[bool](p, `(() => { const i = document.querySelector('dialog[open] [data-field=playbook]'); i.value = 'audit-repo'; i.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
	p.click(`dialog[open] button[data-action=confirm-amended]`)
	p.waitJS(`document.querySelector('dialog[open]') === null`, "the form closed")
	p.waitJS(`document.querySelector('.proposal[data-proposal="`+orig+`"]').dataset.state === 'amended'`, "the original marked amended")
	p.waitJS(`(() => { const c = document.querySelector('.proposal [data-amends="`+orig+`"]'); return c && c.closest('.proposal').querySelector('[data-result=succeeded]') !== null; })()`, "the amended proposal executed")
	p.waitTurnEnd(1)
	p.shot("dock-amended")
	// The model was told what ran.
	var told bool
	for _, f := range conversationFrames(t, d, p.conversationID()) {
		if r, ok := f.Payload.(protocol.ToolResultPayload); ok && r.OK && strings.Contains(string(r.Result), `"amendedFrom":"`+orig+`"`) &&
			strings.Contains(string(r.Result), "amended in the dock") {
			told = true
		}
	}
	if !told {
		t.Fatal("no tool result tells the model what was executed")
	}
}

// TestConversationListStaysTidy: opening the dock and pressing New leave
// no empty "Untitled" conversation behind (the first message starts one
// and names it); later messages never rename it; an untitled conversation
// made elsewhere is named by its first message, not its latest; the list
// box shows its last row whole.
func TestConversationListStaysTidy(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	convs := func() []protocol.Conversation {
		t.Helper()
		page, err := d.client.ListConversations(ctxT(t), "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return page.Conversations
	}
	p := openPage(t, d, "/")
	p.viewport(1440, 900)
	p.openDock()
	p.click(`.conv-actions button:nth-child(1)`) // New
	p.waitJS(`document.querySelector('.composer textarea') === document.activeElement || window.studio.dock.conv === null`, "the dock ready for a new conversation")
	p.click(`.conv-actions button:nth-child(1)`)
	if n := len(convs()); n != 0 {
		t.Fatalf("opening the dock and pressing New twice made %d conversations", n)
	}
	p.send("first question about the audit")
	p.waitTurnEnd(1)
	p.send("a second, different question")
	p.waitTurnEnd(2)
	got := convs()
	if len(got) != 1 || got[0].Title == nil || *got[0].Title != "first question about the audit" {
		t.Fatalf("conversations after two messages: %+v", got)
	}

	// Untitled, made elsewhere with a first message: named by that one.
	untitled, err := d.client.CreateConversation(ctxT(t), protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	submitAs(t, d, d.Token, untitled.ID, "alpha: the first thing asked", false)
	for _, title := range []string{"Third", "Fourth", "Fifth"} {
		tt := title
		if _, err := d.client.CreateConversation(ctxT(t), protocol.CreateConversationRequest{Title: &tt}); err != nil {
			t.Fatal(err)
		}
	}
	p.click(`.dock [data-action=close-dock]`)
	p.openDock()
	eval[bool](p, `(window.studio.dock.list.refresh(), true)`)
	p.waitJS(`document.querySelectorAll('#dock-conv option').length === 5`, "five conversations listed")
	p.setSelect(`#dock-conv`, untitled.ID)
	p.waitJS(`window.studio.dock.conv?.id === `+jsString(untitled.ID)+` && document.querySelectorAll('.transcript .done').length === 1`, "the untitled conversation")
	p.send("beta: the latest thing asked")
	p.waitTurnEnd(2)
	p.waitJS(`document.querySelector('#dock-conv option[value="`+untitled.ID+`"]')?.innerText.startsWith('alpha: the first thing asked')`, "the untitled conversation named by its first message")
	page, err := d.client.GetConversation(ctxT(t), untitled.ID, 0, 1)
	if err != nil || page.Conversation.Title == nil || *page.Conversation.Title != "alpha: the first thing asked" {
		t.Fatalf("the untitled conversation is titled %v (%v)", page.Conversation.Title, err)
	}
	// Five rows, the last one whole.
	if !eval[bool](p, `(() => { const s = document.querySelector('#dock-conv'); return s.size === 5 && s.scrollHeight <= s.clientHeight + 1; })()`) {
		t.Fatalf("the list box cuts its last row: %v", eval[any](p, `(() => { const s = document.querySelector('#dock-conv'); return {size: s.size, scroll: s.scrollHeight, client: s.clientHeight}; })()`))
	}
	p.shot("dock-conversation-list")
}
