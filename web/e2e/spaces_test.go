package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
)

// What an operator who knows Temporal UI, GitHub Actions or Grafana
// expects of the cockpit's spaces: words written for people, decisions and
// named targets in the audit trail, text that does not break, and the
// queries the spaces leave to the server (fleet search, workflow launch and
// delete, history filters).

// appDo calls the application API as a test client; out takes the fields
// it names and ignores the rest.
func appDo(t *testing.T, d *daemon, method, path string, body, out any) {
	t.Helper()
	var raw json.RawMessage
	if err := d.client.Do(ctxT(t), method, path, body, &raw); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// launch starts a run of audit-repo through the API and returns its id.
func launch(t *testing.T, d *daemon, input string) string {
	t.Helper()
	var r struct {
		ID  string `json:"id"`
		Run struct {
			ID string `json:"id"`
		} `json:"run"`
	}
	appDo(t, d, "POST", "/api/app/runs", map[string]any{"playbook": "audit-repo", "input": input, "args": map[string]string{"repo": input}}, &r)
	if r.ID == "" {
		r.ID = r.Run.ID
	}
	if r.ID == "" {
		t.Fatal("the launch answered no run id")
	}
	return r.ID
}

// TestSpacesSpeakToPeople: subtitles written for people, no raw booleans on
// System, a Designer empty state that matches its own button, and
// shortcuts that reach the page.
func TestSpacesSpeakToPeople(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	p := openPage(t, d, "/")
	for _, sp := range spaces.Default.Spaces {
		p.click(fmt.Sprintf(`.rail-link[data-space=%s]`, sp.ID))
		p.waitJS(fmt.Sprintf(`document.querySelector('#crumb h1')?.innerText === %q`, sp.Title), "the title of "+sp.ID)
		got := eval[string](p, `document.querySelector('#crumb').innerText`)
		if !strings.Contains(got, sp.Subtitle) || strings.Contains(got, sp.Description) {
			t.Errorf("%s: the page shows %q; want the subtitle %q and not the model's description", sp.ID, got, sp.Subtitle)
		}
	}

	// System: yes/no and states in words, never true or false.
	p.waitJS(`document.querySelector('.health-head .badge') !== null && document.querySelectorAll('#space .facts').length >= 4`, "the health report")
	if text := eval[string](p, `document.querySelector('#space').innerText`); regexp.MustCompile(`\b(true|false)\b`).MatchString(text) {
		t.Errorf("System shows a raw boolean:\n%s", text)
	}

	// Designer: the empty state names the button that is on the page.
	p.keys("g", "d")
	p.waitJS(`location.pathname === '/designer' && document.querySelector('#space .empty') !== null`, "the empty workflow list")
	empty := eval[string](p, `document.querySelector('#space .empty').innerText`)
	button := eval[string](p, `document.querySelector('#space .filters button.primary').innerText`)
	if !strings.Contains(empty, button) || strings.Contains(empty, "Library") {
		t.Errorf("the empty state %q does not match the button %q", empty, button)
	}

	// Shortcuts: g then a letter from the registry; typed into a field they are text.
	for _, sp := range spaces.Default.Spaces {
		p.keys("g", sp.Shortcut)
		p.waitJS(fmt.Sprintf(`location.pathname === %q`, sp.Path), "g then "+sp.Shortcut)
	}
	p.keys("g", "l")
	p.waitJS(`location.pathname === '/library' && document.querySelector('input[type=search]') !== null`, "the library")
	p.keys("/")
	p.waitJS(`document.activeElement && document.activeElement.type === 'search'`, "/ to focus the search")
	p.do(chromedp.KeyEvent("gh"))
	if loc := p.location(); !strings.HasPrefix(loc, "/library") {
		t.Fatalf("typing g h into the search moved the cockpit to %s", loc)
	}
	p.keys("?")
	p.waitJS(`document.querySelector('dialog[open][data-shortcuts]') !== null`, "the shortcuts overlay")
	overlay := eval[string](p, `document.querySelector('dialog[open][data-shortcuts]').innerText`)
	for _, sp := range spaces.Default.Spaces {
		if !strings.Contains(overlay, "Open "+sp.Title) {
			t.Errorf("the overlay lacks %s:\n%s", sp.Title, overlay)
		}
	}
	p.shot("shortcuts-overlay")
	p.do(chromedp.KeyEvent("\x1b")) // Escape
	p.waitJS(`document.querySelector('dialog[open]') === null`, "Escape to close the overlay")
}

// TestSignInTextHasNoMarkup: the sign-in page shows commands as code, not
// raw Markdown backticks.
func TestSignInTextHasNoMarkup(t *testing.T) {
	t.Parallel()
	requireBrowser(t)
	d := startDaemon(t, failingModel)
	p := openSignedOut(t, d, "/")
	text := eval[string](p, `document.querySelector('form.signin').innerText`)
	if strings.Contains(text, "`") {
		t.Fatalf("the sign-in text shows backticks: %q", text)
	}
	if codes := eval[string](p, `[...document.querySelectorAll('form.signin code')].map(c => c.innerText).join('|')`); codes != "stu_|studio tokens create NAME|studio serve|studio token" {
		t.Fatalf("the commands are not shown as code: %q", codes)
	}
}

// TestAuditTrailShowsDecisionsAndNamedTargets: the Decision column shows
// the decision, not the command type, and Target the target's name with a
// link to it, for the cockpit's own commands and the operator's.
func TestAuditTrailShowsDecisionsAndNamedTargets(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	var sc struct {
		ID      string `json:"id"`
		Version int    `json:"version"`
	}
	appDo(t, d, "GET", "/api/app/schedules/nightly-audit", nil, &sc)
	appDo(t, d, "POST", "/api/app/schedules/nightly-audit/enable", map[string]any{"expectedVersion": sc.Version}, nil)

	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-launch the audit")
	p.waitJS(`document.querySelector('.proposal[data-state=required] button[data-action=confirm]') !== null`, "the proposal card")
	p.click(`.proposal button[data-action=confirm]`)
	p.waitJS(`document.querySelector('.proposal [data-result=succeeded]') !== null`, "the confirmed launch")

	p.do(chromedp.Navigate(d.URL + "/history?tab=audit"))
	p.waitJS(`document.querySelectorAll('.table tbody tr').length >= 3`, "the audit trail")
	type row struct{ Command, Decision, Target, Href string }
	var rows []row
	raw := eval[string](p, `JSON.stringify([...document.querySelectorAll('.table tbody tr')].map(tr => { const td = tr.querySelectorAll('td');
		return { Command: td[2].innerText, Decision: td[3].innerText, Target: td[4].innerText, Href: td[4].querySelector('a')?.getAttribute('href') || '' }; }))`)
	if err := json.Unmarshal([]byte(raw), &rows); err != nil {
		t.Fatal(err)
	}
	find := func(command, decision string) row {
		for _, r := range rows {
			if r.Command == command && r.Decision == decision {
				return r
			}
		}
		t.Fatalf("no audit row %s %s in %+v", command, decision, rows)
		return row{}
	}
	enable := find("Enable or pause schedule", "applied") // words, not set_schedule_enabled
	if !strings.Contains(enable.Target, "nightly-audit") || enable.Href != "/schedules?schedule="+sc.ID {
		t.Errorf("the cockpit's enable row targets %+v, want nightly-audit linked to its schedule", enable)
	}
	executed := find("Launch playbook", "executed")
	if !strings.Contains(executed.Target, "audit-repo") || !strings.HasPrefix(executed.Href, "/library?playbook=") {
		t.Errorf("the operator's launch row targets %+v, want audit-repo linked to the library", executed)
	}
	find("Launch playbook", "confirmed")
	for _, r := range rows {
		if r.Decision == r.Command || regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(strings.TrimSpace(r.Target)) {
			t.Errorf("row %+v shows a command type as decision or a bare id as target", r)
		}
	}
	p.shot("history-audit-named-targets")
	// The link leads to the target.
	p.click(fmt.Sprintf(`.table a[href="/schedules?schedule=%s"]`, sc.ID))
	p.waitJS(`location.pathname === '/schedules' && document.querySelector('.detail h2')?.innerText === 'nightly-audit'`, "the schedule the audit row names")
}

// TestNamesDoNotBreakWithTheDockOpen: at 1440 px with the dock open, names,
// ids and cron expressions stay on one line.
func TestNamesDoNotBreakWithTheDockOpen(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	appDo(t, d, "POST", "/api/app/schedules", map[string]any{"name": "weekday-morning-audit-of-the-api", "cron": "15 9 * * 1-5",
		"playbook": "audit-repo", "args": map[string]string{"repo": "acme/api"}, "enabled": true}, nil)
	p := openPage(t, d, "/schedules")
	p.do(chromedp.EmulateViewport(1440, 960))
	p.openDock()
	p.waitJS(`document.querySelectorAll('.table tbody tr[data-key]').length === 2`, "both schedules")
	p.click(`.table tbody tr[data-key] a.row-link`)
	p.waitJS(`document.querySelector('.detail h2') !== null && document.querySelectorAll('.cron-next li').length === 5`, "a schedule's detail")
	// A token broken across lines has client rects on more than one line.
	broken := eval[[]string](p, `[...document.querySelectorAll('#space .table .name, #space .table code, #space .facts code, #space .id')].filter(el => {
		const r = document.createRange(); r.selectNodeContents(el);
		return new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))).size > 1;
	}).map(el => el.innerText)`)
	if len(broken) > 0 {
		t.Fatalf("tokens broken across lines with the dock open at 1440 px: %q", broken)
	}
	if n := eval[int](p, `document.querySelectorAll('#space .table .name, #space .table code').length`); n < 6 {
		t.Fatalf("only %d name and cron cells were checked", n)
	}
	p.shot("schedules-dock-open-1440")
}

// TestOfflineModelInTheDock: with the default offline model, a theme
// request reads once and stays true beside the applied badge,
// a pause of the paused seeded schedule is answered in words, not proposed
// and each finished answer is announced politely.
func TestOfflineModelInTheDock(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "{}", "--model", "offline")
	p := openPage(t, d, "/schedules")
	eval[bool](p, `(window.studio.applyTheme('light'), true)`)
	p.openDock()
	p.send("switch to dark mode")
	p.waitJS(`document.querySelector('.effect-status')?.dataset.effectStatus === 'applied' && document.querySelector('.transcript .done') !== null`, "the applied theme and the turn's end")
	answer := eval[string](p, `[...document.querySelectorAll('.transcript .msg.assistant')].map(m => m.innerText).join('\n')`)
	if strings.Count(answer, "cockpit") > 1 || strings.Contains(answer, "takes effect once") {
		t.Errorf("beside an applied badge the answer reads %q", answer)
	}
	if got := eval[string](p, `document.querySelector('[data-announcer]').innerText`); !strings.Contains(got, "Operator:") {
		t.Errorf("the live region announced %q", got)
	}
	if eval[string](p, `document.querySelector('.transcript').getAttribute('aria-live') || ''`) == "assertive" {
		t.Error("the transcript interrupts the screen reader")
	}
	p.shot("dock-offline-theme-dark")

	var sc struct{ Version int }
	appDo(t, d, "GET", "/api/app/schedules/nightly-audit", nil, &sc)
	p.send("pause the nightly schedule")
	p.waitJS(`document.querySelectorAll('.transcript .done').length === 2`, "the second turn's end")
	answer = eval[string](p, `[...document.querySelectorAll('.transcript .msg.assistant')].pop().innerText`)
	if !strings.Contains(answer, "nightly-audit is already paused") {
		t.Errorf("a pause of a paused schedule is answered %q", answer)
	}
	if n := eval[int](p, `document.querySelectorAll('.proposal').length`); n != 0 {
		t.Fatalf("a no-op was proposed (%d cards)", n)
	}
	var after struct{ Version int }
	appDo(t, d, "GET", "/api/app/schedules/nightly-audit", nil, &after)
	if after.Version != sc.Version {
		t.Fatalf("the schedule changed from version %d to %d", sc.Version, after.Version)
	}
	p.shot("dock-offline-no-op")
}

// markdownScript streams an answer in many small deltas.
const markdownScript = `{"turns":[{"match":"e2e-markdown","steps":[
 {"text":"First paragraph, "},{"text":"settled early.\n\n"},{"sleepMs":200},
 {"text":"- one\n- t"},{"text":"wo\n\n"},{"sleepMs":200},
 {"text":"` + "```" + `js\nlet x = 1 < 2;\n"},{"text":"` + "```" + `\n\nA **bold** end"},{"text":" with [a link](/history)."}]},
 {"steps":[{"text":"ok"}]}]}`

// TestMarkdownRendersIncrementally: streamed text deltas extend the bubble;
// a settled paragraph is the same DOM node at the end (it is not re-parsed
// and rebuilt per delta), and the result is exactly a full render.
func TestMarkdownRendersIncrementally(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, markdownScript)
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-markdown")
	p.waitJS(`document.querySelector('.transcript .msg.assistant p')?.innerText === 'First paragraph, settled early.'`, "the first paragraph")
	eval[bool](p, `(window.__firstP = document.querySelector('.transcript .msg.assistant p'), true)`)
	p.waitJS(`document.querySelector('.transcript .done') !== null`, "the turn's end")
	if !eval[bool](p, `document.querySelector('.transcript .msg.assistant p') === window.__firstP`) {
		t.Fatal("the settled paragraph was rebuilt by a later delta")
	}
	same := eval[bool](p, `(async () => {
		const base = document.querySelector('script[type=module]').src.replace(/main\.js$/, '');
		const md = await import(base + 'markdown.js');
		const bubble = document.querySelector('.transcript .msg.assistant');
		const text = 'First paragraph, settled early.\n\n- one\n- two\n\n`+"```"+`js\nlet x = 1 < 2;\n`+"```"+`\n\nA **bold** end with [a link](/history).';
		const full = document.createElement('li');
		full.appendChild(md.render(md.parse(text)));
		return bubble.innerHTML === full.innerHTML; })()`)
	if !same {
		t.Fatalf("the streamed bubble differs from a full render:\n%s", eval[string](p, `document.querySelector('.transcript .msg.assistant').innerHTML`))
	}
}

// runScript: every model call (here, playbook runs) streams output slowly.
// The first run stays running long enough (15 s) for a page on a loaded
// 2-core CI machine to observe it running before it ends: the test waits
// for both states, and a window shorter than the page's load and refresh
// made it flaky.
const runScript = `{"turns":[
 {"match":"acme/slow","steps":[{"text":"Audit started. "},{"sleepMs":600000}]},
 {"steps":[{"text":"Audit started. "},{"sleepMs":15000},{"text":"No findings."}]}]}`

// TestRunDetailAndCharts: the run detail shows a timeline, refreshes its
// output while the run runs, shows input, arguments and playbook version,
// links retries both ways and the audit rows of the run; the Mission
// overview charts runs over time by status and the spread of durations,
// with the numbers in words and as a table.
func TestRunDetailAndCharts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, runScript)
	p := openPage(t, d, "/?view=fleet")
	first := launch(t, d, "acme/api")
	eval[bool](p, fmt.Sprintf(`(window.studio.go('/?view=fleet&run=%s'), true)`, first))
	// The executor saves the output as it grows: the detail shows it while
	// the run still runs.
	p.waitJS(`document.querySelector('[data-run-status]')?.dataset.runStatus === 'running' && document.querySelector('.timeline [data-step=started].done') !== null`, "the running run")
	p.waitJS(`document.querySelector('[data-run-status]')?.dataset.runStatus === 'running' && document.querySelector('[data-run-output]').innerText.includes('Audit started.')`, "the running run's output so far")
	if !strings.Contains(eval[string](p, `document.querySelector('.detail').innerText`), "live") {
		t.Error("a running run is not marked live")
	}
	p.shot("run-detail-running")
	// The run ends, with its output, without a reload.
	eval[bool](p, `(window.__sameDoc = true, true)`)
	p.waitJS(`document.querySelector('[data-run-status]')?.dataset.runStatus === 'succeeded' && document.querySelector('[data-run-output]').innerText.includes('No findings.')`, "the run to finish live")
	if !eval[bool](p, `window.__sameDoc === true`) {
		t.Fatal("the page reloaded")
	}
	steps := eval[[]string](p, `[...document.querySelectorAll('.timeline .step')].map(s => s.dataset.step + ':' + s.className.includes('done') + ':' + (s.querySelector('.step-note')?.innerText || ''))`)
	if len(steps) != 3 || !strings.HasPrefix(steps[0], "queued:true:launched by hand") || !strings.HasPrefix(steps[1], "started:true:waited") || !strings.HasPrefix(steps[2], "finished:true:ran") {
		t.Fatalf("timeline %q", steps)
	}
	detail := eval[string](p, `document.querySelector('.detail').innerText`)
	for _, want := range []string{"at version 1", "acme/api", "repo"} {
		if !strings.Contains(detail, want) {
			t.Errorf("the run detail lacks %q:\n%s", want, detail)
		}
	}
	p.waitJS(`document.querySelector('[data-audit-rows] a[href^="/history?tab=audit&event="]') !== null`, "the launch's audit row")

	// Cancel a second run from its detail, retry it, and follow the links.
	second := launch(t, d, "acme/slow")
	p.do(chromedp.Navigate(d.URL + "/?view=fleet&run=" + second))
	p.waitJS(`document.querySelector('[data-run-status]')?.dataset.runStatus === 'running'`, "the second run running")
	p.click(`.detail .actions button.danger`)
	p.waitJS(`document.querySelector('dialog[open]') !== null`, "the cancel confirmation")
	p.click(`dialog[open] button[value=ok]`)
	p.waitJS(`document.querySelector('[data-run-status]')?.dataset.runStatus === 'cancelled'`, "the cancelled run")
	p.waitJS(`[...document.querySelectorAll('[data-audit-rows] li')].some(li => li.innerText.includes('Cancel run'))`, "the cancel's audit row")
	p.click(`.detail .actions button:not(.danger):not(.link)`)
	p.waitJS(fmt.Sprintf(`location.search.includes('run=') && !location.search.includes(%q) && document.querySelector('[data-retries] a') !== null`, second), "the retry's detail")
	if href := eval[string](p, `document.querySelector('[data-retries] a').getAttribute('href')`); !strings.Contains(href, "run="+second) {
		t.Fatalf("the retry links to %s, want run %s", href, second)
	}
	retry := strings.TrimPrefix(regexp.MustCompile(`run=[0-9a-f-]+`).FindString(p.location()), "run=")
	p.click(`[data-retries] a`)
	p.waitJS(fmt.Sprintf(`location.search.includes(%q) && [...document.querySelectorAll('[data-retries] a')].some(a => a.getAttribute('href').includes(%q))`, second, retry), "the retried run linking to its retry")
	p.click(`[data-audit-rows] a`)
	p.waitJS(`location.pathname === '/history' && document.querySelector('#event-title') !== null`, "the audit row the run links to")

	// The overview's charts, with the numbers as text.
	p.do(chromedp.Navigate(d.URL + "/"))
	p.waitJS(`document.querySelectorAll('figure.chart-figure svg[role=img]').length === 3`, "three charts")
	charts := eval[[]string](p, `[...document.querySelectorAll('figure.chart-figure')].map(f => f.querySelector('svg title').textContent + ' | ' + f.querySelector('svg desc').textContent)`)
	if !strings.Contains(charts[0], "3 runs in the last 24 hours") || !strings.Contains(charts[1], "3 runs in the last 7 days") || !strings.Contains(charts[2], "finished run") {
		t.Fatalf("chart texts %q", charts)
	}
	total := eval[int](p, `[...document.querySelectorAll('figure.chart-figure')[0].querySelectorAll('tbody tr td:last-child')].reduce((n, td) => n + Number(td.textContent), 0)`)
	if total != 3 {
		t.Fatalf("the 24-hour chart's table counts %d runs, want 3", total)
	}
	if n := eval[int](p, `document.querySelectorAll('figure.chart-figure')[0].querySelectorAll('rect').length`); n == 0 {
		t.Fatal("the 24-hour chart draws no bars")
	}
	p.shot("mission-overview-charts")
}

// axeSource is axe-core from web/node_modules (npm ci in web/), injected by
// the tests only: the daemon never serves it.
func axeSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		msg := fmt.Sprintf("axe-core is not installed (%v): run `cd web && npm ci`", err)
		if os.Getenv("STUDIO_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIP: " + msg)
	}
	return string(b)
}

// axeCheck runs axe-core on the page and fails on moderate, serious or
// critical violations (minor ones are advice).
func (p *page) axeCheck(src, where string) {
	p.t.Helper()
	if !eval[bool](p, `typeof window.axe === 'object'`) {
		eval[bool](p, src+";\ntrue")
	}
	raw := eval[string](p, `axe.run(document, { resultTypes: ['violations'] }).then(r => JSON.stringify(r.violations
		.filter(v => v.impact === 'moderate' || v.impact === 'serious' || v.impact === 'critical')
		.map(v => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 4).map(n => n.target.join(' ') + ' :: ' + (n.failureSummary || '').split('\n').slice(0, 2).join(' ')) }))))`)
	var vs []struct {
		ID, Impact, Help string
		Nodes            []string
	}
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		p.t.Fatal(err)
	}
	for _, v := range vs {
		p.t.Errorf("%s: axe %s (%s): %s\n  %s", where, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
	}
}

// TestAccessibilityAndScreenshots: every space, the dock and the dialogs
// pass axe-core with no serious violation, in light and dark; the keyboard
// reaches every control; and each space and the dock is photographed in
// light and dark at 1440 px and at a phone's width, with data.
func TestAccessibilityAndScreenshots(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	src := axeSource(t)
	for _, in := range []string{"acme/api", "acme/web"} {
		launch(t, d, in)
	}
	appDo(t, d, "POST", "/api/app/workflows", map[string]any{"name": "nightly-review", "description": "Audit, then summarise what failed.",
		"steps": []map[string]any{{"playbook": "audit-repo", "args": map[string]string{"repo": "acme/api"}}, {"playbook": "summarize-failed-runs"}}}, nil)
	p := openPage(t, d, "/")
	p.do(chromedp.EmulateViewport(1440, 900))
	p.openDock()
	p.send("e2e-launch the audit")
	p.waitJS(`document.querySelector('.proposal[data-state=required]') !== null`, "a proposal in the dock")

	type view struct{ name, path, ready string }
	views := []view{
		{"mission-overview", "/", `document.querySelectorAll('figure.chart-figure').length === 3`},
		{"mission-fleet", "/?view=fleet", `document.querySelectorAll('.table tbody tr[data-key]').length >= 2`},
		{"mission-run", "/?view=fleet&run=" + launch(t, d, "acme/docs"), `document.querySelector('[data-audit-rows], .related .muted') !== null && !document.querySelector('.related .loading')`},
		{"designer", "/designer?workflow=nightly-review", `document.querySelector('form[data-form=workflow]') !== null`},
		{"library", "/library?playbook=audit-repo", `document.querySelector('.detail h2') !== null`},
		{"history-runs", "/history", `document.querySelectorAll('.table tbody tr[data-key]').length >= 1`},
		{"history-audit", "/history?tab=audit", `document.querySelectorAll('.table tbody tr[data-key]').length >= 2 && document.querySelector('.table .decision') !== null`},
		{"schedules", "/schedules?schedule=nightly-audit", `document.querySelectorAll('.cron-next li').length === 5`},
		{"system-health", "/system", `document.querySelector('.health-head .badge') !== null`},
		{"system-maintenance", "/system?tab=maintenance", `document.querySelector('button[data-action=vacuum]') !== null`},
		{"system-appearance", "/system?tab=appearance", `document.querySelector('input[type=radio]') !== null`},
	}
	show := func(theme string, v view) {
		eval[bool](p, fmt.Sprintf(`(window.studio.applyTheme(%q), window.studio.go(%q), true)`, theme, v.path))
		p.waitJS(v.ready, v.name)
		p.waitJS(`!document.querySelector('#space .loading')`, v.name+" loaded")
	}
	for _, theme := range []string{"light", "dark"} {
		for _, v := range views {
			show(theme, v)
			p.axeCheck(src, v.name+" ("+theme+", dock open)")
			p.shot(fmt.Sprintf("1440-%s-%s-dock", theme, v.name))
		}
		// The shortcut overlay and a confirmation dialog.
		p.keys("?")
		p.waitJS(`document.querySelector('dialog[open]') !== null`, "the overlay")
		p.axeCheck(src, "the shortcuts overlay ("+theme+")")
		p.do(chromedp.KeyEvent("\x1b"))
		p.waitJS(`document.querySelector('dialog[open]') === null`, "the overlay closed")
		p.click(`.rail-link[data-space=system]`)
		p.click(`.tab:nth-child(2)`)
		p.click(`button[data-action=vacuum]`)
		p.waitJS(`document.querySelector('dialog[open]') !== null`, "a confirmation dialog")
		p.axeCheck(src, "a confirmation dialog ("+theme+")")
		p.shot("1440-" + theme + "-dialog")
		p.do(chromedp.KeyEvent("\x1b"))
		p.waitJS(`document.querySelector('dialog[open]') === null`, "the dialog closed")
	}

	// Without the dock, and at a phone's width.
	p.click(".dock-toggle")
	for _, size := range []struct {
		name string
		w, h int64
	}{{"1440", 1440, 900}, {"phone", 390, 844}} {
		p.do(chromedp.EmulateViewport(size.w, size.h))
		for _, theme := range []string{"light", "dark"} {
			for _, v := range views {
				show(theme, v)
				if size.name == "phone" {
					p.axeCheck(src, v.name+" ("+theme+", phone)")
				}
				p.shot(fmt.Sprintf("%s-%s-%s", size.name, theme, v.name))
			}
		}
		if size.name == "phone" {
			p.click(".dock-toggle")
			p.waitJS(`document.querySelector('.dock .proposal') !== null`, "the dock on a phone")
			p.axeCheck(src, "the dock (phone)")
			p.shot("phone-dark-dock")
		}
	}
	p.do(chromedp.EmulateViewport(1440, 960))

	// The keyboard reaches the rail, the tabs, the rows and the dock, with a visible focus.
	eval[bool](p, `(window.studio.go('/?view=fleet'), document.activeElement.blur(), true)`)
	p.waitJS(`document.querySelectorAll('.table tbody tr[data-key]').length >= 2`, "the fleet")
	reached := map[string]bool{}
	for i := 0; i < 80; i++ {
		p.do(chromedp.KeyEvent("\t"))
		info := eval[string](p, `(() => { const a = document.activeElement; if (!a || a === document.body) return '';
			const cs = getComputedStyle(a); const visible = cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0 || cs.boxShadow !== 'none';
			return (a.closest('.rail') ? 'rail' : a.closest('[role=tablist]') ? 'tabs' : a.closest('.table tbody') ? 'row' : a.closest('.dock') ? 'dock' : 'other') + ':' + visible; })()`)
		if info == "" {
			continue
		}
		kind, visible, _ := strings.Cut(info, ":")
		reached[kind] = true
		if visible != "true" {
			t.Errorf("focus on a %s control is not visible", kind)
		}
	}
	for _, k := range []string{"rail", "tabs", "row", "dock"} {
		if !reached[k] {
			t.Errorf("Tab never reached the %s (reached %v)", k, reached)
		}
	}
}

// TestFleetSearchesOnTheServer: the fleet's search, counts and paging are
// the server's: a run older than the newest hundred is found by its input,
// the status chips count the range, and "Show older runs" pages with the
// cursor (the old browser-side filter saw only the newest 100 runs).
func TestFleetSearchesOnTheServer(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript)
	oldest := launch(t, d, "needle-in-the-haystack")
	for i := range 110 {
		launch(t, d, fmt.Sprintf("hay %d", i))
	}
	p := openPage(t, d, "/?view=fleet&q=needle")
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 1`, "the one matching run")
	if got := eval[string](p, `document.querySelector('.table tbody tr').dataset.key`); got != oldest {
		t.Fatalf("the search found %s, want %s", got, oldest)
	}
	if got := eval[string](p, `document.querySelector('[data-count=all]').innerText`); !strings.Contains(got, "1") {
		t.Fatalf("the All chip reads %q for one match", got)
	}
	p.do(chromedp.Navigate(d.URL + "/?view=fleet&range=24h"))
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 50 && document.querySelector('[data-more]') !== null`, "the first page of 50")
	all := eval[string](p, `document.querySelector('[data-count=all]').innerText`)
	if !strings.Contains(all, "111") {
		t.Fatalf("the All chip reads %q, want 111 runs in the range", all)
	}
	p.click(`[data-more]`)
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 100`, "the second page appended")
	p.shot("fleet-server-side")
	// The hourly chart's labels never overlap.
	p.do(chromedp.Navigate(d.URL + "/"))
	p.waitJS(`document.querySelectorAll('figure.chart-figure svg[role=img]').length === 3`, "three charts")
	overlaps := eval[int](p, `(() => {
		const ts = [...document.querySelectorAll('figure.chart-figure')[0].querySelectorAll('text.axis')].filter(t => t.textContent.includes(':')).map(t => t.getBoundingClientRect());
		let n = 0;
		for (let i = 1; i < ts.length; i++) if (ts[i].left < ts[i - 1].right + 2) n++;
		return n;
	})()`)
	if overlaps != 0 {
		t.Fatalf("%d hourly axis labels overlap their neighbour", overlaps)
	}
	if got := eval[string](p, `document.querySelectorAll('figure.chart-figure')[0].querySelector('svg desc').textContent`); !strings.Contains(got, "111 runs in the last 24 hours") {
		t.Fatalf("the hourly chart says %q", got)
	}
}

// TestWorkflowsLaunchAndDeleteInDesigner: a workflow launched from the
// Designer queues a run per step, shown by step and in the run detail; a
// delete asks first, then removes it and audits it.
func TestWorkflowsLaunchAndDeleteInDesigner(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript)
	var wf struct{ ID string }
	appDo(t, d, "POST", "/api/app/workflows", map[string]any{"name": "ship", "steps": []map[string]any{
		{"playbook": "audit-repo", "args": map[string]string{"repo": "a"}}, {"playbook": "write-release-notes", "args": map[string]string{"version": "v2"}}}}, &wf)
	p := openPage(t, d, "/designer?workflow="+wf.ID)
	p.click(`button[data-action=launch-workflow]`)
	p.waitJS(`document.querySelectorAll('.step-runs-list li[data-step] .list li').length === 2`, "a run for each step")
	p.shot("designer-runs-by-step")
	p.click(`.step-runs-list li[data-step="1"] .list a`)
	p.waitJS(`document.querySelector('[data-run-workflow]') !== null`, "the run detail naming its workflow")
	if got := eval[string](p, `document.querySelector('[data-run-workflow]').innerText`); !strings.Contains(got, "step 2") {
		t.Fatalf("the run detail says %q", got)
	}
	p.do(chromedp.Navigate(d.URL + "/designer?workflow=" + wf.ID))
	p.click(`button[data-action=delete-workflow]`)
	p.waitJS(`document.querySelector('dialog[open]') !== null`, "the delete confirmation")
	p.click(`dialog[open] button[value=ok]`)
	p.waitJS(`!location.search.includes('workflow=')`, "the deleted workflow closed")
	var list struct{ Workflows []struct{ Name string } }
	appDo(t, d, "GET", "/api/app/workflows", nil, &list)
	for _, w := range list.Workflows {
		if w.Name == "ship" {
			t.Fatal("the workflow is still there")
		}
	}
	var audit struct{ Events []struct{ Actor string } }
	appDo(t, d, "GET", "/api/app/audit?commandType=delete_workflow", nil, &audit)
	if len(audit.Events) != 1 || audit.Events[0].Actor != "owner" { // the token file's principal

		t.Fatalf("delete audit rows: %+v", audit.Events)
	}
}

// TestHistoryFiltersAndOperatorLinks: the audit trail filters on the
// server by command, actor and time, bound to the URL; an operator's row
// opens its conversation in the dock with the proposal in view.
func TestHistoryFiltersAndOperatorLinks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, dockScript)
	launch(t, d, "by hand")
	p := openPage(t, d, "/")
	p.openDock()
	p.send("e2e-launch")
	p.waitJS(`document.querySelector('.proposal[data-state=required] button[data-action=confirm]') !== null`, "the proposal card")
	conv := p.conversationID()
	p.click(`.proposal button[data-action=confirm]`)
	p.waitJS(`document.querySelector('.proposal [data-result]') !== null`, "the confirmation result")
	p.click(".dock-toggle") // close the dock
	p.do(chromedp.Navigate(d.URL + "/history?tab=audit&actor=studio_operator"))
	// The launch the application audited for the operator; the proposal's
	// confirmed and executed rows are the confirming principal's (owner).
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 1`, "the operator's row")
	if n := eval[int](p, `[...document.querySelectorAll('.table tbody tr')].filter(tr => !tr.innerText.includes('Launch playbook')).length`); n != 0 {
		t.Fatalf("%d rows of other commands", n)
	}
	// The action filter is a select bound to the URL.
	eval[bool](p, `(() => { const s = document.querySelector('select[name=action]'); s.value = 'cancel_run'; s.dispatchEvent(new Event('change')); return true; })()`)
	p.waitJS(`location.search.includes('action=cancel_run') && document.querySelector('.table') === null && document.querySelector('.list-pane .empty') !== null`, "no cancel_run rows")
	p.do(chromedp.Navigate(d.URL + "/history?tab=audit&action=launch_playbook"))
	// By hand, the proposal's confirmed and executed rows, the operator's launch.
	p.waitJS(`document.querySelectorAll('.table tbody tr').length === 4`, "the four launch rows")
	p.waitJS(`document.querySelector('[data-open-conversation]') !== null`, "the proposal row's link")
	if got := eval[string](p, `document.querySelector('[data-open-conversation]').dataset.openConversation`); got != conv {
		t.Fatalf("the row opens conversation %s, want %s", got, conv)
	}
	p.shot("history-audit-filtered")
	p.click(`[data-open-conversation]`)
	p.waitJS(`document.querySelector('#app').classList.contains('dock-open') && document.querySelector('.proposal.highlight') !== null`, "the dock open on the proposal")
	if got := p.conversationID(); got != conv {
		t.Fatalf("the dock shows %s, want %s", got, conv)
	}
	p.do(chromedp.Navigate(d.URL + "/system"))
	p.waitJS(`[...document.querySelectorAll('figure.chart-figure svg desc')].some(d => d.textContent.includes('turn'))`, "the operator charts")
	if got := eval[string](p, `document.querySelector('#operator-charts-title').closest('section').innerText`); !strings.Contains(got, "Turn latency") || !strings.Contains(got, "Model errors") {
		t.Fatalf("the System charts read %q", got)
	}
}

// TestAuditByPersonAndTurnsGrouped: the audit's "Who" filter offers the
// people the trail names (and the daemon's own actors), and keeps that
// person's rows only; a person's turns in one conversation are one row
// that names the conversation and opens it, not a row each.
func TestAuditByPersonAndTurnsGrouped(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, reviewScript)
	alice := addPrincipal(t, d, "alice", protocol.RoleOperator)
	appDoAs(t, d, alice, "POST", "/api/app/schedules/nightly-audit/enable", map[string]any{}, nil)
	launch(t, d, "acme/api")
	title := "Three questions"
	c, err := d.client.CreateConversation(ctxT(t), protocol.CreateConversationRequest{Title: &title})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		submitAs(t, d, d.Token, c.ID, fmt.Sprintf("question %d", i), false)
	}
	p := openPage(t, d, "/history?tab=audit")
	p.waitJS(`[...document.querySelectorAll('select[name=actor] option')].some(o => o.value === 'alice')`, "alice among who to filter by")
	offered := eval[[]string](p, `[...document.querySelectorAll('select[name=actor] option')].map(o => o.value).filter(Boolean)`)
	if !strings.Contains(strings.Join(offered, ","), "owner") {
		t.Errorf("the filter offers %v, without owner", offered)
	}
	// The turns: one row, "×3", naming the conversation, with its link.
	p.waitJS(`document.querySelector('[data-grouped="3"]') !== null`, "the three turns grouped")
	row := eval[string](p, `document.querySelector('[data-grouped="3"]').closest('tr').innerText`)
	if !strings.Contains(row, "Three questions") || !strings.Contains(row, "Open the conversation") {
		t.Errorf("the grouped row reads %q", row)
	}
	if n := eval[int](p, `[...document.querySelectorAll('.list-pane tbody tr')].filter(tr => tr.innerText.includes('Turn submitted')).length`); n != 1 {
		t.Errorf("%d rows of submitted turns, want one", n)
	}
	p.shot("audit-grouped-turns")
	eval[bool](p, `(() => { const s = document.querySelector('select[name=actor]'); s.value = 'alice'; s.dispatchEvent(new Event('change')); return true; })()`)
	p.waitJS(`location.search.includes('actor=alice') && document.querySelectorAll('.list-pane tbody tr').length === 1`, "alice's one row")
	if who := eval[string](p, `document.querySelector('.list-pane tbody tr [data-who]').innerText`); who != "alice" {
		t.Fatalf("the filtered row is %q's", who)
	}
}
