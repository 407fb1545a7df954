package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/testutil"
)

// failingModel: the provider fails every call (turns and runs alike).
const failingModel = `{"turns":[{"steps":[{"fail":{"code":"model_failure","message":"the model provider is down","retryable":true}}]}]}`

// operatorScript drives the dock tests. Matches are unusual words so that a
// playbook run's prompt (which the same provider executes) never matches
// anything but the last, catch-all turn.
const operatorScript = `{"turns":[
 {"match":"e2e-go-fleet","steps":[
   {"tool":"navigate","arguments":{"space":"mission","params":{"view":"fleet","status":"failed"}}},
   {"text":"I asked the cockpit to show the **failed runs**; it is done once your browser confirms."}]},
 {"match":"e2e-select-ghost","steps":[
   {"tool":"select","arguments":{"space":"mission","selection":{"run":"00000000-0000-4000-8000-000000000000"}}},
   {"text":"I asked the cockpit to select that run."}]},
 {"match":"e2e-launch","steps":[
   {"tool":"launch_playbook","arguments":{"playbook":"audit-repo","input":"requested from the dock","args":{"repo":"studio/operator"}}},
   {"text":"The launch is ready for your confirmation."}]},
 {"match":"e2e-slow","steps":[
   {"tool":"navigate","arguments":{"space":"mission","params":{"view":"fleet"}}},
   {"text":"Opened the fleet; still thinking…"},
   {"sleepMs":600000},
   {"text":"never reached"}]},
 {"match":"e2e-prefill-playbook","steps":[{"tool":"prefill_form","arguments":{"form":"playbook","values":{"name":"triage","description":"Sort new issues","prompt":"Triage {{input}}"}}},{"text":"Filled in."}]},
 {"match":"e2e-prefill-schedule","steps":[{"tool":"prefill_form","arguments":{"form":"schedule","values":{"name":"hourly-triage","cron":"0 * * * *","playbook":"summarize-failed-runs","enabled":false}}},{"text":"Filled in."}]},
 {"match":"e2e-dark","steps":[{"tool":"set_theme","arguments":{"theme":"dark"}},{"text":"Switched."}]},
 {"steps":[{"text":"Audit finished: no findings. <script>alert(1)</script>"}]}
]}`

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// conversationFrames reads every frame of a conversation through the API.
func conversationFrames(t *testing.T, d *daemon, convID string) []protocol.Frame {
	t.Helper()
	page, err := d.client.GetConversation(ctxT(t), convID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []protocol.Frame
	for _, raw := range page.Frames {
		b, _ := protocol.Marshal(raw)
		f, err := protocol.DecodeFrame(b)
		if err != nil {
			t.Fatalf("frame %d: %v", raw.Sequence, err)
		}
		out = append(out, f)
	}
	return out
}

// effectOf returns the first ui_command payload of a conversation.
func effectOf(t *testing.T, d *daemon, convID string) protocol.UICommandPayload {
	t.Helper()
	for _, f := range conversationFrames(t, d, convID) {
		if p, ok := f.Payload.(protocol.UICommandPayload); ok {
			return p
		}
	}
	t.Fatalf("conversation %s has no ui_command frame", convID)
	return protocol.UICommandPayload{}
}

func (p *page) conversationID() string {
	p.t.Helper()
	p.waitJS(`window.studio.dock && window.studio.dock.conv !== null`, "an open conversation")
	return eval[string](p, `window.studio.dock.conv.id`)
}

// waitEffectAcked waits until the dock has recorded and acknowledged an effect.
func (p *page) waitEffectAcked(status string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf(`(() => { const s = JSON.parse(localStorage.getItem('studio.effects') || '{}');
		return Object.values(s).some(r => r.status === %q && r.acked); })()`, status), "an acknowledged "+status+" effect")
}

func ptr[T any](v T) *T { return &v }

// TestCockpitWorksWithTheModelFailing walks every space through /api/app
// with a provider that fails every call, with and without the dock, takes a
// screenshot of each space, and checks sign-in, URL state and shortcuts.
func TestCockpitWorksWithTheModelFailing(t *testing.T) {
	t.Parallel()
	requireBrowser(t)
	d := startDaemon(t, failingModel)

	// The sign-in URL is printed on stdout with the token in the fragment,
	// and the token is not in the logs.
	testutil.Eventually(t, func() bool { return strings.Contains(d.out(), "#token=") }, "the sign-in URL on stdout")
	if want := d.URL + "/#token=" + d.Token; !strings.Contains(d.out(), want) {
		t.Fatalf("stdout %q lacks the sign-in URL %s/#token=…", d.out(), d.URL)
	}
	if strings.Contains(d.logs(), d.Token) {
		t.Fatal("the token appears in the daemon's log")
	}

	p := openPage(t, d, "/")
	// The token moved to sessionStorage and left the address bar.
	if href := eval[string](p, `location.href`); strings.Contains(href, "token") {
		t.Fatalf("the token is still in the address bar: %s", href)
	}
	if eval[string](p, `sessionStorage.getItem('studio.token')`) != d.Token {
		t.Fatal("the token is not in sessionStorage")
	}
	// The rail comes from the registry: six spaces in its order.
	rail := eval[[]string](p, `[...document.querySelectorAll('.rail-link')].map(a => a.getAttribute('href'))`)
	if strings.Join(rail, " ") != "/ /designer /library /history /schedules /system" {
		t.Fatalf("rail %v", rail)
	}

	// Mission overview.
	p.waitJS(`document.querySelector('.stat .big') !== null`, "the run counts")
	p.shot("space-1-mission-overview")

	// Library: the starter playbooks; launch one (the run fails: no model).
	p.click(`.rail-link[data-space=library]`)
	p.waitJS(`[...document.querySelectorAll('.table tbody tr')].some(tr => tr.innerText.includes('audit-repo'))`, "the starter playbooks")
	p.click(`.table tbody tr[data-key]`)
	p.waitJS(`location.search.startsWith('?playbook=') && document.querySelector('.detail h2') !== null`, "a playbook's detail")
	pbName := eval[string](p, `document.querySelector('.detail h2').innerText`)
	p.shot("space-3-library")
	// Fill the launch form's required fields and launch.
	eval[bool](p, `(() => { document.querySelectorAll('.subform input[required], .subform textarea[required]').forEach(i => { i.value = 'e2e'; }); return true; })()`)
	p.click(`.subform button[type=submit]`)
	p.waitJS(`location.search.includes('view=fleet') && location.search.includes('run=')`, "the launched run in the fleet")
	p.waitJS(`document.querySelector('.detail .badge') && ['failed','succeeded'].includes(document.querySelector('.detail .badge').innerText)`, "the run to finish")
	if got := eval[string](p, `document.querySelector('.detail .badge').innerText`); got != "failed" {
		t.Fatalf("a run with a failing provider ended %q", got)
	}
	p.shot("space-1-mission-fleet")

	// URL state: a reload shows the same view, selection included.
	loc := p.location()
	p.do(chromedp.Reload())
	p.waitJS(`document.querySelector('.detail .badge') !== null`, "the run detail after reload")
	if p.location() != loc {
		t.Fatalf("after reload at %s the cockpit shows %s", loc, p.location())
	}
	if !strings.Contains(eval[string](p, `document.querySelector('.detail').innerText`), pbName) {
		t.Fatal("the reloaded run detail does not name its playbook")
	}

	// Keyboard: g then d opens the designer, g then h history.
	p.keys("g", "d")
	p.waitJS(`location.pathname === '/designer'`, "g then d to open the designer")
	p.waitJS(`document.querySelector('.table, .empty') !== null`, "the workflows")
	// Create a workflow with the editor form.
	p.click(`.filters button.primary`)
	p.do(chromedp.SendKeys(chromedp.CSS(`form[data-form=workflow] input[name=name]`), "nightly-review"))
	// Two steps in the step editor: the first row is there, the second added.
	p.setValue(`[data-step-edit]:nth-child(1) .step-playbook`, "audit-repo")
	// audit-repo needs its repo: a workflow without it is refused when saved.
	p.setArg(1, "repo", "acme/api")
	p.click(`[data-action=add-step]`)
	p.setValue(`[data-step-edit]:nth-child(2) .step-playbook`, "summarize-failed-runs")
	p.click(`form[data-form=workflow] button[type=submit]`)
	p.waitJS(`[...document.querySelectorAll('.table tbody tr')].some(tr => tr.innerText.includes('nightly-review'))`, "the new workflow")
	p.shot("space-2-designer")

	p.keys("g", "h")
	p.waitJS(`location.pathname === '/history'`, "g then h to open history")
	p.waitJS(`[...document.querySelectorAll('.table tbody tr')].some(tr => tr.innerText.includes('failed'))`, "the failed run in history")
	p.shot("space-4-history-runs")
	p.click(`.tab:nth-child(2)`)
	p.waitJS(`location.search === '?tab=audit' && document.querySelectorAll('.table tbody tr').length > 0`, "the audit trail")
	p.shot("space-4-history-audit")

	// Schedules: create one with the cron preview.
	p.click(`.rail-link[data-space=schedules]`)
	p.waitJS(`[...document.querySelectorAll('.table tbody tr')].some(tr => tr.innerText.includes('nightly-audit'))`, "the starter schedule")
	p.click(`.filters button.primary`)
	p.do(
		chromedp.SendKeys(chromedp.CSS(`form[data-form=schedule] input[name=name]`), "weekday-morning"),
		chromedp.SendKeys(chromedp.CSS(`form[data-form=schedule] input[name=cron]`), "0 9 * * 1-5"),
	)
	p.waitJS(`document.querySelectorAll('.cron-next li').length === 5`, "the cron preview of the next five runs")
	p.waitJS(`document.querySelector('form[data-form=schedule] select[name=playbook] option[value="audit-repo"]') !== null`, "the playbook choices")
	p.do(chromedp.SetValue(chromedp.CSS(`form[data-form=schedule] select[name=playbook]`), "audit-repo"))
	eval[bool](p, `(document.querySelector('form[data-form=schedule] select[name=playbook]').dispatchEvent(new Event('change')), true)`)
	p.do(chromedp.SendKeys(chromedp.CSS(`form[data-form=schedule] input[name=arg-repo]`), "studio/operator"))
	p.shot("space-5-schedules-create")
	p.click(`form[data-form=schedule] button[type=submit]`)
	p.waitJS(`[...document.querySelectorAll('.table tbody tr')].some(tr => tr.innerText.includes('weekday-morning'))`, "the new schedule")
	// Enable the paused starter schedule with its switch.
	p.click(`.table tbody tr[data-key] .switch input:not(:checked)`)
	p.waitJS(`[...document.querySelectorAll('.table tbody tr')].filter(tr => tr.querySelector('.switch input:checked')).length === 2`, "both schedules enabled")
	p.shot("space-5-schedules")

	// System: health, a maintenance action behind its dialog, the theme.
	p.keys("g", "y")
	p.waitJS(`location.pathname === '/system' && document.querySelector('.health-head .badge') !== null`, "the doctor report")
	p.shot("space-6-system-health")
	p.click(`.tab:nth-child(2)`)
	p.click(`button[data-action=checkpoint]`)
	p.waitJS(`document.querySelector('dialog[open]') !== null`, "the confirmation dialog")
	p.click(`dialog[open] button[value=ok]`)
	p.waitJS(`document.querySelector('.maintenance-result .card') !== null`, "the maintenance result")
	p.click(`.tab:nth-child(3)`)
	p.click(`input[type=radio][value=dark]`)
	p.waitJS(`document.documentElement.dataset.theme === 'dark'`, "the dark theme")
	p.shot("space-6-system-appearance-dark")
	p.click(`.rail-link[data-space=mission]`)
	p.waitJS(`document.querySelector('.stat .big') !== null`, "the overview in dark")
	p.shot("space-1-mission-overview-dark")

	// The dock with the provider down: the turn ends with a visible, coded
	// error; the cockpit keeps working.
	p.openDock()
	p.send("hello")
	p.waitJS(`[...document.querySelectorAll('.transcript .error .code')].some(e => e.innerText === 'model_failure')`, "the model_failure error in the dock")
	p.waitJS(`document.querySelector('.transcript .done') !== null`, "the turn's end")
	p.shot("dock-model-failure")
	p.click(`.rail-link[data-space=library]`)
	p.waitJS(`document.querySelectorAll('.table tbody tr').length >= 3`, "the library with the dock open")
}

// TestSignInForm: a page without a token explains itself and accepts a
// pasted token.
func TestSignInForm(t *testing.T) {
	t.Parallel()
	requireBrowser(t)
	d := startDaemon(t, failingModel)
	p := openSignedOut(t, d, "/library")
	if label := eval[string](p, `document.querySelector('label[for="' + document.querySelector('form.signin input').id + '"]').innerText`); label != "Token" {
		t.Fatalf("sign-in input label %q", label)
	}
	p.shot("signin")
	p.do(chromedp.SendKeys(chromedp.CSS(`form.signin input`), d.Token+"\r"))
	p.waitJS(`location.pathname === '/library' && document.querySelector('.rail') !== null`, "the cockpit after sign-in")
	if q := eval[string](p, `location.search + location.hash`); q != "" {
		t.Fatalf("the URL carries %q after sign-in", q)
	}
}

// TestNavigateEffectAppliedAndAcknowledged: a navigate effect moves the
// cockpit and is acknowledged applied with exactly its route, which the
// server stored (an identical repeat returns the stored acknowledgement; a
// contradicting one is a conflict).
func TestNavigateEffectAppliedAndAcknowledged(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/library")
	p.openDock()
	p.send("e2e-go-fleet please")
	p.waitJS(`location.pathname + location.search === '/?view=fleet&status=failed'`, "the navigate effect to apply")
	p.waitEffectAcked("applied")
	p.waitJS(`document.querySelector('.transcript .done') !== null`, "the turn to end")
	// The model's markdown rendered as DOM, not HTML.
	if n := eval[int](p, `document.querySelectorAll('.transcript .msg.assistant strong').length`); n == 0 {
		t.Fatal("markdown bold was not rendered")
	}
	p.shot("dock-navigate-effect")

	convID := p.conversationID()
	eff := effectOf(t, d, convID)
	ctx := ctxT(t)
	st, err := d.client.AckEffect(ctx, convID, eff.EffectID, protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/?view=fleet&status=failed")})
	if err != nil {
		t.Fatalf("identical repeat of the browser's ack: %v", err)
	}
	if st.Status != "applied" || st.ClientRoute == nil || *st.ClientRoute != "/?view=fleet&status=failed" || st.AcknowledgedAt == nil {
		t.Fatalf("stored acknowledgement %+v", st)
	}
	_, err = d.client.AckEffect(ctx, convID, eff.EffectID, protocol.AckEffectRequest{Status: "rejected", RejectionCode: ptr("not_visible")})
	if protocol.CodeOf(err) != protocol.Conflict {
		t.Fatalf("contradicting ack: %v, want conflict", err)
	}
	// The turn's context snapshot carried the space and route it was sent from.
	frames := conversationFrames(t, d, convID)
	if len(frames) == 0 || frames[0].Type != protocol.FrameText {
		t.Fatalf("first frame %+v", frames)
	}
}

// TestEffectRejections: effects the cockpit refuses are acknowledged
// rejected with the right code.
//
//   - not_visible: a select of a run id that does not exist. The registry
//     accepts it (any id is well formed), so the server emits it; only the
//     browser can know the item cannot be shown.
//   - invalid_params: the server never emits an effect its registry refuses,
//     so the refusal happens when the tab's registry is older than the
//     daemon's — a tab loaded before an upgrade. The test makes the loaded
//     registry lack the status value "failed", as an older daemon's would,
//     then receives a navigate to status=failed.
func TestEffectRejections(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/library")
	p.openDock()

	p.send("e2e-select-ghost")
	p.waitEffectAcked("rejected")
	p.waitJS(`document.querySelector('.effect-status[data-effect-status=rejected]') !== null`, "the rejection shown in the dock")
	if !strings.Contains(eval[string](p, `document.querySelector('.effect-status[data-effect-status=rejected]').innerText`), "not_visible") {
		t.Fatal("the dock does not show not_visible")
	}
	if loc := p.location(); loc != "/library" {
		t.Fatalf("a refused select moved the cockpit to %s", loc)
	}
	p.shot("dock-effect-not-visible")
	convID := p.conversationID()
	ctx := ctxT(t)
	eff := effectOf(t, d, convID)
	st, err := d.client.AckEffect(ctx, convID, eff.EffectID, protocol.AckEffectRequest{Status: "rejected", RejectionCode: ptr("not_visible")})
	if err != nil || st.Status != "rejected" || st.RejectionCode == nil || *st.RejectionCode != "not_visible" {
		t.Fatalf("stored rejection %+v %v", st, err)
	}
	p.waitJS(`document.querySelector('.transcript .done') !== null && !document.querySelector('.composer button[type=submit]').disabled`, "the turn to end")

	// An older registry in the tab: mission's status enum lacks "failed".
	eval[bool](p, `(() => { const sp = window.studio.registry.space('mission');
		const st = sp.params.find(p => p.name === 'status'); st.values = st.values.filter(v => v !== 'failed'); return true; })()`)
	p.send("e2e-go-fleet")
	p.waitJS(`[...document.querySelectorAll('.effect-status[data-effect-status=rejected]')].some(e => e.innerText.includes('invalid_params'))`, "the invalid_params rejection")
	if loc := p.location(); loc != "/library" {
		t.Fatalf("a refused navigate moved the cockpit to %s", loc)
	}
	var second protocol.UICommandPayload
	for _, f := range conversationFrames(t, d, convID) {
		if pl, ok := f.Payload.(protocol.UICommandPayload); ok && pl.EffectID != eff.EffectID {
			second = pl
		}
	}
	p.waitJS(fmt.Sprintf(`JSON.parse(localStorage.getItem('studio.effects'))[%q]?.acked === true`, second.EffectID), "the invalid_params acknowledgement")
	st, err = d.client.AckEffect(ctx, convID, second.EffectID, protocol.AckEffectRequest{Status: "rejected", RejectionCode: ptr("invalid_params")})
	if err != nil || st.Status != "rejected" || *st.RejectionCode != "invalid_params" {
		t.Fatalf("stored rejection %+v %v", st, err)
	}
}

// TestReloadMidTurnAppliesEffectsOnce: the turn applies a navigate effect
// and keeps running; the operator moves elsewhere and reloads. The replay
// shows the effect as applied and does not apply it again; the running turn
// can be cancelled from the reloaded page.
func TestReloadMidTurnAppliesEffectsOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/history")
	p.openDock()
	p.send("e2e-slow")
	p.waitJS(`location.pathname + location.search === '/?view=fleet'`, "the navigate effect")
	p.waitEffectAcked("applied")
	p.waitJS(`[...document.querySelectorAll('.transcript .msg.assistant')].some(m => m.innerText.includes('still thinking'))`, "the text after the effect")
	convID := p.conversationID()
	eff := effectOf(t, d, convID)
	first, err := d.client.AckEffect(ctxT(t), convID, eff.EffectID, protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/?view=fleet")})
	if err != nil {
		t.Fatal(err)
	}

	// Move away, then reload in the middle of the turn.
	p.click(`.rail-link[data-space=library]`)
	p.waitJS(`location.pathname === '/library'`, "the library")
	p.do(chromedp.Reload())
	p.waitJS(`window.studio && window.studio.dock && window.studio.dock.conv !== null && document.querySelector('.transcript .effect') !== null`, "the replayed conversation")
	p.waitJS(`document.querySelector('.effect-status').dataset.effectStatus === 'applied'`, "the replayed effect shown as applied")
	p.waitJS(`document.querySelector('.dock .pill').dataset.state === 'open'`, "the live stream after reload")
	if loc := p.location(); loc != "/library" {
		t.Fatalf("the replay applied the effect again: the cockpit is at %s", loc)
	}
	if n := eval[int](p, `window.studio.dock.appliedCount`); n != 0 {
		t.Fatalf("%d effects applied after the reload", n)
	}
	again, err := d.client.AckEffect(ctxT(t), convID, eff.EffectID, protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/?view=fleet")})
	if err != nil || *again.AcknowledgedAt != *first.AcknowledgedAt {
		t.Fatalf("the acknowledgement changed: %+v then %+v (%v)", first, again, err)
	}
	// The turn still runs; cancel it from the reloaded page.
	p.waitJS(`!document.querySelector('.composer .danger').hidden`, "the cancel button of the running turn")
	p.shot("dock-reload-mid-turn")
	p.click(`.composer .danger`)
	p.waitJS(`[...document.querySelectorAll('.transcript .done')].some(e => e.innerText.includes('cancelled'))`, "done(cancelled)")
	if loc := p.location(); loc != "/library" {
		t.Fatalf("after the cancel the cockpit is at %s", loc)
	}
}

// TestProposalConfirmedFromCard: a launch proposal renders as a card with
// risk, target, the exact command and a countdown; Confirm sends the stored
// hash; the run then appears in the fleet.
func TestProposalConfirmedFromCard(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-launch the audit")
	p.waitJS(`document.querySelector('.proposal[data-state=required] button[data-action=confirm]') !== null`, "the proposal card")
	card := strings.ToLower(eval[string](p, `document.querySelector('.proposal').textContent`))
	for _, want := range []string{"runs work", "launch playbook", "audit-repo", "studio/operator", "expires in"} {
		if !strings.Contains(card, want) {
			t.Fatalf("the card lacks %q:\n%s", want, card)
		}
	}
	if !eval[bool](p, `document.querySelector('.proposal').classList.contains('risk-execute')`) {
		t.Fatal("the execute risk is not visually distinct")
	}
	p.shot("dock-proposal")
	p.click(`.proposal button[data-action=confirm]`)
	p.waitJS(`document.querySelector('.proposal [data-result]') !== null`, "the confirmation result")
	if res := eval[string](p, `document.querySelector('.proposal [data-result]').dataset.result`); res != "succeeded" {
		t.Fatalf("confirmation result %q: %s", res, eval[string](p, `document.querySelector('.proposal').innerText`))
	}
	if eval[int](p, `document.querySelectorAll('.proposal button[data-action]').length`) != 0 {
		t.Fatal("the buttons are still there after the result")
	}
	p.shot("dock-proposal-confirmed")
	// The run is in the fleet, launched by the operator.
	p.click(`.rail-link[data-space=mission]`)
	p.click(`.tab:nth-child(2)`)
	p.waitJS(`[...document.querySelectorAll('.table tbody tr')].some(tr => tr.innerText.includes('audit-repo') && tr.innerText.includes('operator'))`, "the operator's run in the fleet")
	p.shot("fleet-after-proposal")
}

// TestEventSourceWithTicket: a real browser EventSource, authenticated by a
// one-use stream ticket (the protocol module's ticket transport), receives
// a conversation's frames.
func TestEventSourceWithTicket(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	ctx := ctxT(t)
	conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	acc, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "hello there",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	err = d.client.Stream(ctx, conv.ID, 0, func(f protocol.Frame) error {
		if f.Type == protocol.FrameDone && f.RequestID == acc.RequestID {
			last = f.Sequence
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p := openPage(t, d, "/")
	eval[bool](p, fmt.Sprintf(`(async () => {
		const base = document.querySelector('script[type=module]').src.replace(/main\.js$/, '');
		const m = await import(base + 'stream.js');
		window.__es = { frames: [], states: [] };
		window.__es.handle = m.followWithTicket({ client: window.studio.operator, conversationId: %q, after: 0 }, {
			onFrame: (f) => window.__es.frames.push(f),
			onState: (s) => window.__es.states.push(s),
			onError: (e) => window.__es.error = String(e),
		});
		return true; })()`, conv.ID))
	p.waitJS(fmt.Sprintf(`window.__es.frames.length >= %d || window.__es.error`, last), "the frames over EventSource")
	raw := eval[string](p, `JSON.stringify(window.__es)`)
	var got struct {
		Frames []protocol.RawFrame `json:"frames"`
		States []string            `json:"states"`
		Error  string              `json:"error"`
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	if got.Error != "" || int64(len(got.Frames)) != last {
		t.Fatalf("EventSource: %d frames, want %d; error %q", len(got.Frames), last, got.Error)
	}
	for i, f := range got.Frames {
		if f.Sequence != int64(i+1) || f.ConversationID != conv.ID {
			t.Fatalf("frame %d: %+v", i, f)
		}
	}
	if got.Frames[len(got.Frames)-1].Type != protocol.FrameDone {
		t.Fatalf("last frame %s", got.Frames[len(got.Frames)-1].Type)
	}
	// The browser asked for a ticket and never put the bearer token in a URL.
	if !strings.Contains(strings.Join(got.States, ","), "open") {
		t.Fatalf("states %v", got.States)
	}
	eval[bool](p, `(window.__es.handle.stop(), true)`)
}

// TestThemeEffect: a theme effect switches the theme and is acknowledged
// with the current route.
func TestThemeEffect(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/schedules")
	eval[bool](p, `(window.studio.applyTheme('light'), true)`)
	p.openDock()
	p.send("e2e-dark mode")
	p.waitJS(`document.documentElement.dataset.theme === 'dark'`, "the dark theme")
	p.waitEffectAcked("applied")
	convID := p.conversationID()
	eff := effectOf(t, d, convID)
	st, err := d.client.AckEffect(ctxT(t), convID, eff.EffectID, protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/schedules")})
	if err != nil || st.Status != "applied" {
		t.Fatalf("stored ack %+v %v", st, err)
	}
	p.waitJS(`document.querySelector('.transcript .done') !== null`, "the turn to end")
	// Model text with HTML stays text.
	if n := eval[int](p, `document.querySelectorAll('.transcript script').length`); n != 0 {
		t.Fatal("model text became a script element")
	}
	p.shot("dock-dark")
}

// TestDockConversations: new, rename, archive (read-only), delete; and a
// submit against a conversation that moved on behind the page's back is
// refused as stale_context, refreshed and explained — never resubmitted.
func TestDockConversations(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("hello one")
	p.waitJS(`[...document.querySelectorAll('.transcript .msg.assistant')].some(m => m.innerText.includes('Audit finished'))`, "the first answer")
	p.waitJS(`document.querySelector('.transcript .done') !== null && !document.querySelector('.composer button[type=submit]').disabled`, "the turn to end")
	// Model text with HTML in it stays text.
	if n := eval[int](p, `document.querySelectorAll('.transcript script, .transcript img').length`); n != 0 {
		t.Fatal("model text became markup")
	}
	convID := p.conversationID()

	// The page goes quiet (as if its connection hung), and another client
	// adds a turn behind its back.
	eval[bool](p, `(window.studio.dock.stream.stop(), true)`)
	ctx := ctxT(t)
	page, err := d.client.GetConversation(ctx, convID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	last := page.LatestSequence
	acc, err := d.client.SubmitTurn(ctx, convID, protocol.TurnRequest{Instruction: "from elsewhere",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
	if err != nil {
		t.Fatal(err)
	}
	err = d.client.Stream(ctx, convID, last, func(f protocol.Frame) error {
		if f.Type == protocol.FrameDone && f.RequestID == acc.RequestID {
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	turnsBefore := len(conversationFrames(t, d, convID))
	p.send("hello two")
	p.waitJS(`document.querySelector('.composer .form-error').innerText.includes('was not sent')`, "the stale_context explanation")
	if got := strings.TrimSpace(eval[string](p, `document.querySelector(".composer textarea").value`)); got != "hello two" {
		t.Fatalf("the unsent message was not kept in the composer: %q", got)
	}
	p.waitJS(`[...document.querySelectorAll('.transcript .msg.user')].some(m => m.innerText.includes('from elsewhere'))`, "the refreshed conversation")
	if n := len(conversationFrames(t, d, convID)); n != turnsBefore {
		t.Fatalf("a turn was submitted after stale_context: %d frames, was %d", n, turnsBefore)
	}
	p.shot("dock-stale-context")

	// Rename.
	p.click(`.conv-actions button:nth-child(2)`)
	p.waitJS(`document.querySelector('dialog[open] input') !== null`, "the rename dialog")
	eval[bool](p, `(document.querySelector('dialog[open] input').value = '', true)`)
	p.do(chromedp.SendKeys(chromedp.CSS(`dialog[open] input`), "Renamed conversation\r"))
	p.waitJS(`document.querySelector('#dock-conv').selectedOptions[0].innerText.startsWith('Renamed conversation')`, "the new title")
	// Archive: read-only.
	p.click(`.conv-actions button:nth-child(3)`)
	p.waitJS(`document.querySelector('.composer textarea').disabled && document.querySelector('#dock-conv').selectedOptions[0].innerText.includes('(archived)')`, "the archived, read-only conversation")
	c, err := d.client.GetConversation(ctx, convID, 0, 1)
	if err != nil || c.Conversation.Status != "archived" || c.Conversation.Title == nil || *c.Conversation.Title != "Renamed conversation" {
		t.Fatalf("conversation %+v %v", c.Conversation, err)
	}
	// New clears the dock for a conversation its first message starts; then delete the old one.
	p.click(`.conv-actions button:nth-child(1)`)
	p.waitJS(`window.studio.dock.conv === null && document.querySelector('.transcript .empty') !== null`, "the dock cleared for a new conversation")
	p.do(chromedp.SetValue(chromedp.CSS(`#dock-conv`), convID))
	eval[bool](p, `(document.querySelector('#dock-conv').dispatchEvent(new Event('change')), true)`)
	p.waitJS(`window.studio.dock.conv && window.studio.dock.conv.id === '`+convID+`'`, "the old conversation again")
	p.click(`.conv-actions button:nth-child(4)`)
	p.waitJS(`document.querySelector('dialog[open]') !== null`, "the delete confirmation")
	p.click(`dialog[open] button[value=ok]`)
	p.waitJS(`![...document.querySelectorAll('#dock-conv option')].some(o => o.value === '`+convID+`')`, "the deleted conversation gone")
	if _, err := d.client.GetConversation(ctx, convID, 0, 1); protocol.CodeOf(err) != protocol.NotFound {
		t.Fatalf("deleted conversation: %v", err)
	}
}

// TestPrefillEffect: a prefill never overwrites a form with unsaved edits
// (rejected stale_context); otherwise it opens the form's space with the
// values filled in, and nothing is created until the operator saves.
func TestPrefillEffect(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/library")
	p.click(`.filters button.primary`)
	p.do(chromedp.SendKeys(chromedp.CSS(`form[data-form=playbook] input[name=name]`), "my-own-draft"))
	p.openDock()
	p.send("e2e-prefill-playbook")
	p.waitJS(`[...document.querySelectorAll('.effect-status[data-effect-status=rejected]')].some(e => e.innerText.includes('stale_context'))`, "the stale_context rejection")
	if v := eval[string](p, `document.querySelector('form[data-form=playbook] input[name=name]').value`); v != "my-own-draft" {
		t.Fatalf("the prefill overwrote the operator's edit: %q", v)
	}
	p.waitJS(`document.querySelector('.transcript .done') !== null && !document.querySelector('.composer button[type=submit]').disabled`, "the turn to end")

	// The operator discards the draft; now a prefill may open a form.
	p.click(`form[data-form=playbook] .actions button[type=button]`)
	p.waitJS(`document.querySelector('form[data-form=playbook]') === null`, "the draft discarded")
	p.send("e2e-prefill-schedule")
	p.waitJS(`location.pathname === '/schedules' && document.querySelector('form[data-form=schedule] input[name=name]')?.value === 'hourly-triage'`, "the prefilled schedule form")
	p.waitJS(`document.querySelectorAll('.cron-next li').length === 5`, "the cron preview of the prefilled expression")
	p.waitJS(`document.querySelector('form[data-form=schedule] select[name=playbook]').value === 'summarize-failed-runs'`, "the prefilled playbook")
	if eval[bool](p, `document.querySelector('form[data-form=schedule] input[name=enabled]').checked`) {
		t.Fatal("enabled=false was not prefilled")
	}
	p.waitEffectAcked("applied")
	p.shot("dock-prefill-schedule")
	convID := p.conversationID()
	var last protocol.UICommandPayload
	for _, f := range conversationFrames(t, d, convID) {
		if pl, ok := f.Payload.(protocol.UICommandPayload); ok {
			last = pl
		}
	}
	st, err := d.client.AckEffect(ctxT(t), convID, last.EffectID, protocol.AckEffectRequest{Status: "applied", ClientRoute: ptr("/schedules")})
	if err != nil || st.Status != "applied" {
		t.Fatalf("stored ack %+v %v", st, err)
	}
	// Nothing was created by the prefill.
	if n := eval[int](p, `document.querySelectorAll('.table tbody tr[data-key]').length`); n != 1 {
		t.Fatalf("%d schedules listed, want only the starter one", n)
	}
	p.click(`form[data-form=schedule] button[type=submit]`)
	p.waitJS(`[...document.querySelectorAll('.table tbody tr')].some(tr => tr.innerText.includes('hourly-triage'))`, "the schedule the operator saved")
}

// TestStreamReconnectsAfterRestart: the daemon goes away; the dock shows
// that it is reconnecting, and when the daemon is back on the same address
// the stream resumes from the cursor: frames written since arrive once,
// nothing is resubmitted.
func TestStreamReconnectsAfterRestart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemonAt(t, dataDir, "127.0.0.1:0", operatorScript)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("hello before")
	p.waitJS(`document.querySelector('.transcript .done') !== null && document.querySelector('.dock .pill').dataset.state === 'open'`, "the first turn")
	convID := p.conversationID()
	before := len(conversationFrames(t, d, convID))

	d.stop()
	p.waitJS(`document.querySelector('.dock .pill').dataset.state === 'reconnecting' && document.querySelector('[data-notice=reconnect]') !== null`, "the reconnecting state")
	p.shot("dock-reconnecting")

	addr := strings.TrimPrefix(d.URL, "http://")
	d2 := startDaemonAt(t, dataDir, addr, operatorScript)
	// Another client adds a turn while the page is still waiting to reconnect.
	ctx := ctxT(t)
	last := int64(before)
	acc, err := d2.client.SubmitTurn(ctx, convID, protocol.TurnRequest{Instruction: "written while away",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
	if err != nil {
		t.Fatal(err)
	}
	_ = acc
	p.do(chromedp.Evaluate[chromedp.Void](`window.studio.dock.stream.reconnectNow()`))
	p.waitJS(`document.querySelector('.dock .pill').dataset.state === 'open'`, "the stream live again")
	p.waitJS(`[...document.querySelectorAll('.transcript .msg.user')].some(m => m.innerText.includes('written while away')) && document.querySelectorAll('.transcript .done').length === 2`, "the frames written while away")
	if n := eval[int](p, `[...document.querySelectorAll('.transcript .msg.user')].filter(m => m.innerText.includes('written while away')).length`); n != 1 {
		t.Fatalf("the turn written while away shows %d times", n)
	}
	if n := eval[int](p, `document.querySelectorAll('.transcript .msg.user').length`); n != 2 {
		t.Fatalf("%d user messages, want 2 (nothing resubmitted)", n)
	}
	if got := eval[int](p, fmt.Sprintf(`Number(localStorage.getItem('studio.cursor.%s'))`, convID)); got != len(conversationFrames(t, d2, convID)) {
		t.Fatalf("stored cursor %d, want the last sequence", got)
	}
}

// TestTwoTabsApplyAnEffectOnce: two tabs of one browser follow the same
// conversation; the effect is applied by exactly one of them.
func TestTwoTabsApplyAnEffectOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p1 := openPage(t, d, "/library")
	p1.openDock()
	p1.send("hello")
	p1.waitJS(`document.querySelector('.transcript .done') !== null && !document.querySelector('.composer button[type=submit]').disabled`, "the first turn")
	// A second tab in the same browser profile (shared localStorage).
	ctx2, cancel := chromedp.NewContext(p1.ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx2); err != nil {
		t.Fatal(err)
	}
	p2 := &page{t: t, ctx: ctx2, d: d}
	p2.do(chromedp.Navigate(d.URL + "/history#token=" + d.Token)) // sessionStorage is per tab
	p2.waitJS(`document.querySelector('.rail-link') !== null`, "the second tab")
	p2.openDock()
	p2.waitJS(`window.studio.dock.conv && window.studio.dock.conv.id === `+fmt.Sprintf("%q", p1.conversationID())+` && document.querySelector('.dock .pill').dataset.state === 'open'`, "the same conversation live in the second tab")
	p1.send("e2e-go-fleet")
	p1.waitEffectAcked("applied")
	p2.waitJS(`document.querySelector('.effect-status')?.dataset.effectStatus === 'applied'`, "the effect shown in the second tab")
	p1.waitJS(`document.querySelector('.effect-status')?.dataset.effectStatus === 'applied'`, "the effect shown in the first tab")
	n1 := eval[int](p1, `window.studio.dock.appliedCount`)
	n2 := eval[int](p2, `window.studio.dock.appliedCount`)
	if n1+n2 != 1 {
		t.Fatalf("the effect was applied %d times (tab 1: %d, tab 2: %d)", n1+n2, n1, n2)
	}
}

// TestProposalExpires: with a short proposal lifetime the countdown reaches
// zero, the buttons go, and a reload (replaying the frames, including the
// server's own expiry) still shows it expired; nothing ran.
func TestProposalExpires(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript, "--proposal-ttl", "2s")
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-launch")
	p.waitJS(`document.querySelector('.proposal') !== null`, "the proposal card")
	p.waitJS(`document.querySelector('.proposal [data-result=expired]') !== null && document.querySelectorAll('.proposal button[data-action]').length === 0`, "the card to expire")
	p.do(chromedp.Reload())
	p.waitJS(`document.querySelector('.proposal [data-result=expired]') !== null`, "the expired card after reload")
	var runs struct {
		Runs []json.RawMessage `json:"runs"`
	}
	if err := d.client.Do(ctxT(t), "GET", "/api/app/runs", nil, &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs.Runs) != 0 {
		t.Fatalf("an expired proposal launched %d runs", len(runs.Runs))
	}
}
