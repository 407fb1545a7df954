package e2e_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The cockpit in a second browser: Debian's firefox-esr, driven over
// WebDriver BiDi by puppeteer-core (Firefox has no CDP, so chromedp cannot
// drive it) through web/e2e/firefox/bridge.mjs, which the test speaks JSON
// lines to. Without firefox-esr, node or the bridge's node_modules the test
// skips, saying so; STUDIO_REQUIRE_FIREFOX=1 (CI) makes that a failure.

// firefoxDir is the bridge's npm project.
const firefoxDir = "firefox"

func firefoxPath() string {
	if p := os.Getenv("STUDIO_FIREFOX"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return ""
		}
		return p
	}
	for _, p := range []string{"/usr/bin/firefox-esr", "/usr/bin/firefox"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// requireFirefox skips (or, under STUDIO_REQUIRE_FIREFOX=1, fails) when
// there is no Firefox, node or puppeteer-core to drive it with.
func requireFirefox(t *testing.T) {
	t.Helper()
	var missing []string
	if firefoxPath() == "" {
		missing = append(missing, "Firefox is not installed (looked for /usr/bin/firefox-esr; set STUDIO_FIREFOX to another path): `apt-get install -y firefox-esr`")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node is not installed")
	}
	if _, err := os.Stat(filepath.Join(firefoxDir, "node_modules", "puppeteer-core", "package.json")); err != nil {
		missing = append(missing, "puppeteer-core is not installed: `cd web/e2e/firefox && npm ci`")
	}
	if len(missing) == 0 {
		return
	}
	msg := "the Firefox end-to-end test did not run: " + strings.Join(missing, "; ")
	if os.Getenv("STUDIO_REQUIRE_FIREFOX") == "1" {
		t.Fatal("STUDIO_REQUIRE_FIREFOX=1: " + msg)
	}
	t.Skip("SKIP: " + msg)
}

// firefox is the bridge process and the one browser it drives.
type firefox struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	answers chan bridgeAnswer
	exited  chan struct{}

	readyOnce sync.Once
	readyErr  error

	mu     sync.Mutex // guards nextID and stderr
	nextID int
	stderr strings.Builder
}

type bridgeAnswer struct {
	ID    int             `json:"id"`
	Ready bool            `json:"ready"`
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

// startFirefox starts the bridge and, through it, Firefox, without waiting
// for it; the bridge ends (and closes the browser) when the test ends.
func startFirefox(t *testing.T) *firefox {
	t.Helper()
	cmd := exec.Command("node", "bridge.mjs")
	cmd.Dir = firefoxDir
	cmd.Env = append(os.Environ(), "FIREFOX="+firefoxPath())
	f := &firefox{cmd: cmd, answers: make(chan bridgeAnswer, 1), exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &f.mu, b: &f.stderr}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.stdin = stdin
	go func() {
		defer close(f.exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var a bridgeAnswer
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				a = bridgeAnswer{ID: -1, Error: "the bridge wrote " + sc.Text()}
			}
			f.answers <- a
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = stdin.Close() // the bridge closes the browser and exits
		select {
		case <-f.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-f.exited
		}
	})
	return f
}

// waitReady waits for Firefox to have started (the bridge's first line),
// once: the test seeds its daemon meanwhile.
func (f *firefox) waitReady(t *testing.T) {
	t.Helper()
	f.readyOnce.Do(func() {
		select {
		case a := <-f.answers:
			switch {
			case a.Error != "":
				f.readyErr = errors.New(a.Error)
			case !a.Ready:
				f.readyErr = fmt.Errorf("the Firefox bridge's first answer: %+v", a)
			default:
				t.Logf("firefox: %s", a.Value)
			}
		case <-f.exited:
			f.readyErr = errors.New("the Firefox bridge exited")
		case <-time.After(waitTimeout):
			f.readyErr = errors.New("Firefox did not start in time")
		}
	})
	if f.readyErr != nil {
		t.Fatalf("%v\n%s", f.readyErr, f.logs())
	}
}

// lockedWriter collects the bridge's stderr while the test reads it.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (f *firefox) logs() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stderr.String()
}

// call sends one request and waits for its answer.
func (f *firefox) call(req map[string]any) (json.RawMessage, error) {
	f.mu.Lock()
	f.nextID++
	id := f.nextID
	f.mu.Unlock()
	req["id"] = id
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := f.stdin.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("the Firefox bridge: %w", err)
	}
	deadline := time.After(waitTimeout + 15*time.Second) // a wait may take waitTimeout in the page
	for {
		select {
		case a := <-f.answers:
			if a.ID != id { // the late answer to a request given up on
				continue
			}
			if a.Error != "" {
				return nil, errors.New(a.Error)
			}
			return a.Value, nil
		case <-f.exited:
			return nil, fmt.Errorf("the Firefox bridge exited:\n%s", f.logs())
		case <-deadline:
			return nil, fmt.Errorf("no answer to %s in %s", req["op"], waitTimeout)
		}
	}
}

// ffPage is one Firefox tab (its own browser context) on a daemon's cockpit.
type ffPage struct {
	t  *testing.T
	f  *firefox
	id string
}

// openAs opens a tab signed in with a token, the way `studio serve`'s
// printed link does (the token in the fragment).
func (f *firefox) openAs(t *testing.T, d *daemon, path, token string) *ffPage {
	t.Helper()
	f.waitReady(t)
	v, err := f.call(map[string]any{"op": "open", "url": d.URL + path + "#token=" + token})
	if err != nil {
		t.Fatalf("firefox: open %s: %v", path, err)
	}
	p := &ffPage{t: t, f: f}
	if err := json.Unmarshal(v, &p.id); err != nil {
		t.Fatal(err)
	}
	p.waitJS(`document.querySelector('.rail .rail-link') !== null`, "the cockpit rail")
	return p
}

func (p *ffPage) do(req map[string]any) json.RawMessage {
	p.t.Helper()
	req["page"] = p.id
	v, err := p.f.call(req)
	if err != nil {
		p.t.Fatalf("firefox: %s: %v", req["op"], err)
	}
	return v
}

// ffEval evaluates a JavaScript expression (awaiting a promise) in the page.
func ffEval[T any](p *ffPage, js string) T {
	p.t.Helper()
	var out T
	if err := json.Unmarshal(p.do(map[string]any{"op": "eval", "js": js}), &out); err != nil {
		p.t.Fatalf("eval %s: %v", js, err)
	}
	return out
}

// waitJS polls a JavaScript predicate until it is truthy.
func (p *ffPage) waitJS(predicate, what string) {
	p.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		// The page polls; the call is repeated only when the page was
		// replaced (a reload) before the predicate held.
		_, err := p.f.call(map[string]any{"op": "wait", "page": p.id, "js": "!!(" + predicate + ")",
			"pollMs": pollEvery.Milliseconds(), "timeoutMs": time.Until(deadline).Milliseconds()})
		if err == nil {
			return
		}
		lastErr = err
		time.Sleep(pollEvery)
	}
	p.shot("timeout-" + sanitize(what))
	p.t.Fatalf("firefox: waiting for %s (last error %v)\npage: %s", what, lastErr,
		ffEval[string](p, `location.pathname + location.search + ' | ' + (document.querySelector('#space')?.innerText || '').slice(0, 600)`))
}

func (p *ffPage) viewport(w, h int) {
	p.t.Helper()
	p.do(map[string]any{"op": "viewport", "width": w, "height": h})
}

// click scrolls an element into view and clicks it with the mouse.
func (p *ffPage) click(sel string) {
	p.t.Helper()
	p.do(map[string]any{"op": "click", "selector": sel})
}

// goTo moves the cockpit to a path as its own links do.
func (p *ffPage) goTo(path string) {
	p.t.Helper()
	ffEval[bool](p, `(window.studio.go(`+jsString(path)+`), true)`)
}

// shot saves a screenshot as a test artifact, under firefox/.
func (p *ffPage) shot(name string) {
	p.t.Helper()
	path := screenshotPath(p.t, "firefox/"+name)
	if _, err := p.f.call(map[string]any{"op": "shot", "page": p.id, "path": path}); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p.t.Logf("screenshot: %s", path)
}

// consoleErrors fails the test on the console errors and uncaught
// exceptions since the last look.
func (p *ffPage) consoleErrors(where string) {
	p.t.Helper()
	var errs []string
	if err := json.Unmarshal(p.do(map[string]any{"op": "errors"}), &errs); err != nil {
		p.t.Fatal(err)
	}
	for _, e := range errs {
		p.t.Errorf("%s: Firefox console: %s", where, e)
	}
}

func (p *ffPage) openDock() {
	p.t.Helper()
	if !ffEval[bool](p, `document.querySelector('#app').classList.contains('dock-open')`) {
		p.click(".dock-toggle")
	}
	p.waitJS(`document.querySelector('#app').classList.contains('dock-open') && (document.querySelector('.dock .pill') && document.querySelector('.dock .pill').dataset.state !== 'connecting' || document.querySelector('.transcript .empty'))`, "the dock")
}

// send types an instruction into the dock and sends it with Enter.
func (p *ffPage) send(text string) {
	p.t.Helper()
	p.waitJS(`!document.querySelector('.composer button[type=submit]').disabled && !document.querySelector('.dock').classList.contains('turn-running')`, "the composer to accept a message")
	p.do(map[string]any{"op": "type", "selector": ".composer textarea", "text": text})
	p.do(map[string]any{"op": "key", "key": "Enter"})
}

// spaceChecksJS measures a space in one call: what sticks out past the
// window, how wide the page is (it must not scroll sideways), what the
// lists clip (when listed) and which rail names are hidden or cut.
func spaceChecksJS(lists bool) string {
	clipped := "[]"
	if lists {
		clipped = "await " + clippedJS
	}
	return `(async () => ({ over: ` + overflowJS + `, pageWidth: document.scrollingElement.scrollWidth, clipped: ` + clipped + `, railHidden: ` + railNamesHiddenJS + ` }))()`
}

type spaceChecks struct {
	Over       []string `json:"over"`
	PageWidth  float64  `json:"pageWidth"`
	Clipped    []string `json:"clipped"`
	RailHidden []string `json:"railHidden"`
}

// report fails the test on what the checks found.
func (c spaceChecks) report(t *testing.T, where string, width int) {
	t.Helper()
	if len(c.Over) > 0 {
		t.Errorf("%s: past the window's edge: %s", where, strings.Join(c.Over, "; "))
	}
	if c.PageWidth > float64(width) {
		t.Errorf("%s: the page is %.0f px wide in a %d px window", where, c.PageWidth, width)
	}
	if len(c.Clipped) > 0 {
		t.Errorf("%s: %v", where, c.Clipped)
	}
	if width < 1440 && len(c.RailHidden) > 0 {
		t.Errorf("%s: the rail hides or cuts the names %v", where, c.RailHidden)
	}
}

// dockChecksJS measures the open dock on a card in one call.
func dockChecksJS(card string) string {
	return `(() => { const c = document.querySelector(` + jsString(card) + `); const b = c.querySelector('button[data-action=confirm]');
	return { confirmable: !b.disabled, why: c.querySelector('[data-why]')?.innerText || '', card: c.innerText,
		convsHeight: document.querySelector('.dock-convs').getBoundingClientRect().height,
		factsCut: ` + proposalFactsCutJS + `, convRowsCut: ` + convRowsCutJS + `,
		shellScrolled: [document.scrollingElement, ...document.querySelectorAll('#app, .workspace, .dock, body')].filter(e => e.scrollTop !== 0 || e.scrollLeft !== 0).map(e => e.id || e.className || e.tagName),
		outOfView: ['.dock [data-action=close-dock]', '.dock .composer textarea'].filter(s => !` + inViewJS + `(document.querySelector(s))) }; })()`
}

type dockChecks struct {
	Confirmable   bool     `json:"confirmable"`
	Why           string   `json:"why"`
	Card          string   `json:"card"`
	ConvsHeight   float64  `json:"convsHeight"`
	FactsCut      []string `json:"factsCut"`
	ConvRowsCut   []string `json:"convRowsCut"`
	ShellScrolled []string `json:"shellScrolled"`
	OutOfView     []string `json:"outOfView"`
}

// TestFirefoxCockpit: the cockpit of a team, after some weeks, in Firefox,
// for each role (admin, operator, approver, viewer) at 1440, 800 and 390 px:
// it loads signed in; every space renders with nothing past the window's
// edge, the page no wider than the window and the lists' cells unclipped;
// the rail names its spaces; the dock opens without scrolling the shell,
// its conversation rows fit with their time whole, and a conversation
// opened on a waiting launch shows the launch's Confirm;
// no console error or uncaught exception. An approver (and the operator
// who asked) may confirm the waiting launch, a viewer may not; the
// operator asks a question and sees the answer stream in, then confirms a
// launch it asked for, and it executes. Screenshots go to
// $STUDIO_ARTIFACTS/firefox: <role>-<width>.png with the dock open, and
// (when $STUDIO_ARTIFACTS is set) the admin's every space.
func TestFirefoxCockpit(t *testing.T) {
	t.Parallel()
	requireFirefox(t)
	ff := startFirefox(t) // starts while the daemon is seeded
	d := launchDaemon(t, t.TempDir(), "127.0.0.1:0", reviewScript)
	data := seedReview(t, d)
	views := data.views()
	lists := map[string]bool{"fleet": true, "history": true, "audit": true}
	waiting := `.transcript .proposal[data-proposal="` + data.proposal + `"]`
	roles := []struct {
		name, principal, token string
		role                   protocol.Role
	}{
		{"admin", "owner", d.Token, protocol.RoleAdmin},
		{"operator", "alice", data.alice, protocol.RoleOperator},
		{"approver", "bea", data.bea, protocol.RoleApprover},
		{"viewer", "vic", data.vic, protocol.RoleViewer},
	}
	for _, r := range roles {
		t.Run(r.name, func(t *testing.T) {
			p := ff.openAs(t, d, "/", r.token)
			p.waitJS(`document.querySelector('[data-identity] [data-me]')?.innerText === `+jsString(r.principal)+` && document.querySelector('[data-identity] .role-badge')?.innerText === `+jsString(string(r.role)), r.principal+" in the top bar")
			for _, size := range []struct{ w, h int }{{1440, 900}, {800, 1000}, {390, 844}} {
				at := fmt.Sprintf("%s at %d px", r.name, size.w)
				p.viewport(size.w, size.h)
				if ffEval[bool](p, `document.querySelector('#app').classList.contains('dock-open')`) {
					p.click(".dock [data-action=close-dock]") // on a phone the sheet covers the top bar's toggle
				}
				for _, v := range views {
					p.goTo(v.path)
					p.waitJS(`!document.querySelector('#app').classList.contains('dock-open') && `+v.ready+` && !document.querySelector('#space .loading')`, v.name+" at "+at)
					ffEval[spaceChecks](p, spaceChecksJS(lists[v.name] && size.w < 1440)).report(t, at+", "+v.name, size.w)
					if r.role == protocol.RoleAdmin && artifactsOnce() != "" { // for a person to compare with Chromium's review-*.png
						p.shot(fmt.Sprintf("admin-%d-%s", size.w, v.name))
					}
				}

				// The dock, on the waiting launch (alice's).
				p.goTo("/")
				p.openDock()
				ffEval[bool](p, `(() => { const s = document.querySelector('#dock-conv'); s.value = `+jsString(data.conv)+`; s.dispatchEvent(new Event('change')); return true; })()`)
				p.waitJS(`document.querySelector('`+waiting+`[data-state=required] button[data-action=confirm]') !== null && `+views[0].ready, "the waiting launch at "+at)
				// Opened on it, the transcript shows the card's buttons, once
				// the card has learned who proposed it and the progress line
				// took its room.
				p.waitJS(`document.querySelector('`+waiting+` [data-people]').innerText !== '' && `+inTranscriptJS+`(document.querySelector('`+waiting+` button[data-action=confirm]'))`, "the waiting launch's Confirm in view at "+at)
				c := ffEval[dockChecks](p, dockChecksJS(waiting))
				if r.role == protocol.RoleViewer && (c.Confirmable || !strings.Contains(c.Why, "needs the operator role; you are a viewer")) {
					t.Errorf("%s: the viewer may confirm, or is not told why not: %s", at, c.Card)
				}
				if r.role != protocol.RoleViewer && !c.Confirmable {
					t.Errorf("%s: an %s may confirm the launch, but Confirm is disabled: %s", at, r.role, c.Card)
				}
				if size.w == 390 && c.ConvsHeight > 0 {
					t.Errorf("%s: the conversation controls take %.0f px of the sheet before they are asked for", at, c.ConvsHeight)
				}
				if len(c.FactsCut) > 0 {
					t.Errorf("%s: the proposal's facts are cut: %q", at, c.FactsCut)
				}
				if len(c.ConvRowsCut) > 0 {
					t.Errorf("%s: the conversation list cuts rows: %q", at, c.ConvRowsCut)
				}
				if len(c.ShellScrolled) > 0 {
					t.Errorf("%s: the shell scrolled: %v", at, c.ShellScrolled)
				}
				if len(c.OutOfView) > 0 {
					t.Errorf("%s: outside the window: %v", at, c.OutOfView)
				}
				ffEval[spaceChecks](p, spaceChecksJS(false)).report(t, at+", the dock open", size.w)
				p.shot(fmt.Sprintf("%s-%d", r.name, size.w))
				p.consoleErrors(at)
			}
			if r.role == protocol.RoleOperator {
				operatorTurns(t, p, d)
			}
			p.consoleErrors(r.name)
		})
	}
	// The seeded launch waits still: looking at it decided nothing.
	props, err := d.client.Proposals(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range props {
		if pr.ID == data.proposal && pr.Status != string(store.ProposalPending) {
			t.Errorf("the seeded proposal is %s", pr.Status)
		}
	}
}

// operatorTurns: in a new conversation the operator asks a question and
// sees the answer stream in, then asks for a launch, confirms its card,
// and the card and the server say it executed.
func operatorTurns(t *testing.T, p *ffPage, d *daemon) {
	t.Helper()
	p.viewport(1440, 900)
	p.openDock()
	p.click(".dock [data-action=new-conversation]")
	p.waitJS(`document.querySelector('.transcript .empty') !== null`, "a new conversation")
	// The answer's rows arrive by the stream, in the page as it is.
	ffEval[bool](p, `(window.ffSamePage = true, true)`)
	p.send("What failed this week?")
	p.waitJS(`[...document.querySelectorAll('.transcript .msg.assistant')].some(m => m.innerText.includes('Done: nothing to report.')) && document.querySelectorAll('.transcript .done').length === 1`, "the streamed answer")
	p.send("e2e-launch the audit")
	card := `.transcript .proposal[data-state=required]`
	p.waitJS(`document.querySelector('`+card+` button[data-action=confirm]') && !document.querySelector('`+card+` button[data-action=confirm]').disabled`, "the launch's card")
	id := ffEval[string](p, `document.querySelector('`+card+`').dataset.proposal`)
	p.shot("operator-1440-proposal")
	p.click(card + ` button[data-action=confirm]`)
	done := `.transcript .proposal[data-state=succeeded][data-proposal="` + id + `"]`
	p.waitJS(`document.querySelector('`+done+`') !== null`, "the confirmed launch's card to say it executed")
	// What waits is counted again: the seeded launch alone, and nothing in
	// this conversation.
	p.waitJS(`document.querySelector('[data-inbox-count]')?.dataset.inboxCount === '1'
		&& document.querySelector('#dock-conv option:checked')?.dataset.waiting === '0'`, "the inbox and the conversation list to count the confirmed launch out")
	if !ffEval[bool](p, `window.ffSamePage === true`) {
		t.Error("the page reloaded during the turns")
	}
	p.shot("operator-1440-executed")
	props, err := d.client.Proposals(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range props {
		if pr.ID == id && (pr.Status != string(store.ProposalSucceeded) || pr.DecidedBy != "alice") {
			t.Errorf("the confirmed proposal on the server: status %s, decided by %q", pr.Status, pr.DecidedBy)
		}
	}
}
