package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// Layout: where a detail shows, what scrolls, what a phone's width keeps.
// Each measures the page (boxes, focus, scroll offsets), never pixels.

// viewport sizes the page as a device of that width and height.
func (p *page) viewport(w, h int64) {
	p.t.Helper()
	p.do(chromedp.EmulateViewport(w, h))
}

// inView is the JavaScript test that an element's box is inside the window.
const inViewJS = `((el) => { if (!el) return false; const r = el.getBoundingClientRect();
	return r.width > 0 && r.height > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight + 0.5 && r.right <= innerWidth + 0.5; })`

// inTranscriptJS is the JavaScript test that an element is inside the
// dock's transcript's visible box (the transcript scrolls on its own).
const inTranscriptJS = `((el) => { if (!el) return false; const t = document.querySelector('.transcript').getBoundingClientRect(), r = el.getBoundingClientRect();
	return r.height > 0 && r.top >= t.top - 0.5 && r.bottom <= t.bottom + 0.5; })`

// clippedJS lists what a list's tables hide or cut off: hidden cells, cells
// past the table's box, a table wider than its box with no cue saying so.
// It looks after the next two animation frames: a table's sideways cue is
// set in the frame after the table is laid out, and the rows a test waits
// for may have arrived just before.
const clippedJS = `(async () => { await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))); const out = [];
	for (const wrap of document.querySelectorAll('#space .list-pane .table-wrap')) {
		const box = wrap.getBoundingClientRect();
		const cue = wrap.parentElement.querySelector('.scroll-cue');
		const cued = cue && getComputedStyle(cue).display !== 'none';
		if (wrap.scrollWidth > wrap.clientWidth + 1 && !cued) out.push('a table wider than its box, with no cue: ' + wrap.scrollWidth + ' > ' + wrap.clientWidth);
		for (const c of wrap.querySelectorAll('tbody td')) {
			const label = c.dataset.label || c.cellIndex;
			if (getComputedStyle(c).display === 'none') { out.push('hidden: ' + label); continue; }
			if (!cued && c.getBoundingClientRect().right > box.right + 1) out.push('cut off: ' + label + ' ' + c.innerText.slice(0, 30));
			if (c.scrollWidth > c.clientWidth + 1 && getComputedStyle(c).overflow !== 'visible') out.push('clipped inside: ' + label + ' ' + c.innerText.slice(0, 30));
		}
	}
	return [...new Set(out)]; })()`

// railNamesHiddenJS lists the rail's space names that are hidden, outside
// the window or cut (at a tablet's and a phone's width each icon carries
// its name).
const railNamesHiddenJS = `[...document.querySelectorAll('.rail-link')].map(a => { const t = a.querySelector('.rail-title');
	const r = t.getBoundingClientRect(); return getComputedStyle(t).display !== 'none' && r.width > 0 && r.left >= 0 && r.right <= innerWidth && t.scrollWidth <= t.clientWidth + 1 ? '' : t.innerText; }).filter(Boolean)`

// proposalFactsCutJS lists the proposal cards' facts that are cut instead
// of wrapped.
const proposalFactsCutJS = `[...document.querySelectorAll('.proposal .facts dd')].filter(dd => dd.scrollWidth > dd.clientWidth + 1 || dd.getBoundingClientRect().right > dd.closest('.proposal').getBoundingClientRect().right + 1).map(dd => dd.innerText)`

// convRowsCutJS lists the dock's conversation rows that are cut at the
// list's edge, or whose time is not shown whole at the row's end: a list
// box's option is plain text, which the list clips wherever it ends. A
// row's text is measured in the list's font against the list's inner
// width, and by the option's own box where the browser lays one out.
const convRowsCutJS = `(() => { const s = document.querySelector('#dock-conv'); if (!s || !s.clientWidth) return [];
	const cs = getComputedStyle(s); const ctx = document.createElement('canvas').getContext('2d');
	ctx.font = cs.fontStyle + ' ' + cs.fontWeight + ' ' + cs.fontSize + ' ' + cs.fontFamily;
	const pad = (e) => { const c = getComputedStyle(e); return parseFloat(c.paddingLeft) + parseFloat(c.paddingRight); };
	return [...s.options].filter(o => o.value).map(o => {
		const room = s.clientWidth - pad(s) - pad(o), wide = ctx.measureText(o.text).width;
		if (wide > room + 0.5) return o.text + ' (' + Math.round(wide) + ' px of text in ' + Math.round(room) + ')';
		if (o.scrollWidth > o.clientWidth + 1) return o.text + ' (its box scrolls: ' + o.scrollWidth + ' > ' + o.clientWidth + ')';
		if (!o.dataset.age || !o.text.endsWith(' · ' + o.dataset.age)) return o.text + ' (the time is not whole at the end)';
		return ''; }).filter(Boolean); })()`

// TestRunDetailOpensWhereTheEyeIs: clicking a run in a long fleet shows
// its detail inside the window and moves focus to it; Escape closes it and
// gives focus back to the run's row. At 1440×900 with the dock open, and on
// a phone.
func TestRunDetailOpensWhereTheEyeIs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	src := axeSource(t)
	var ids []string
	for i := 0; i < 14; i++ {
		ids = append(ids, launch(t, d, fmt.Sprintf("acme/repo-%02d", i)))
	}
	p := openPage(t, d, "/?view=fleet")
	for _, size := range []struct {
		name string
		w, h int64
		dock bool
	}{{"1440-dock", 1440, 900, true}, {"phone", 390, 844, false}} {
		p.viewport(size.w, size.h)
		if size.dock {
			p.openDock()
		} else if eval[bool](p, `document.querySelector('#app').classList.contains('dock-open')`) {
			p.click(".dock [data-action=close-dock]") // on a phone the sheet covers the top bar's toggle
		}
		eval[bool](p, `(window.studio.go('/?view=fleet'), true)`)
		p.waitJS(`document.querySelectorAll('.list-pane tbody tr[data-key]').length === 14`, "the fleet's runs")
		// A run low in the list, as a person would click it.
		id := ids[1]
		row := fmt.Sprintf(`.list-pane tr[data-key="%s"] a.row-link`, id)
		eval[bool](p, `(document.querySelector('`+row+`').scrollIntoView({block: 'center'}), true)`)
		p.click(row)
		p.waitJS(`document.querySelector('.detail [data-run-status]') !== null`, "the run's detail")
		if !eval[bool](p, inViewJS+`(document.querySelector('.detail #run-title'))`) {
			t.Errorf("%s: the run's heading is outside the window: %v", size.name, eval[any](p, `document.querySelector('.detail #run-title').getBoundingClientRect().toJSON()`))
		}
		p.waitJS(`document.activeElement && document.activeElement.closest('.detail') !== null`, size.name+": focus in the detail (it is on "+eval[string](p, `document.activeElement.tagName + '.' + document.activeElement.className`)+")")
		p.axeCheck(src, "a run's detail ("+size.name+")")
		p.shot(size.name + "-run-detail-in-view")
		p.do(chromedp.KeyEvent(kb.Escape))
		p.waitJS(`!location.search.includes('run=') && document.activeElement && document.activeElement.closest('tr') && document.activeElement.closest('tr').dataset.key === '`+id+`'`, size.name+": focus back on the run's row")
		if !eval[bool](p, inViewJS+`(document.activeElement)`) {
			t.Errorf("%s: the focused row is outside the window", size.name)
		}
		if size.dock && !eval[bool](p, `document.querySelector('#app').classList.contains('dock-open')`) {
			t.Errorf("%s: Escape in a detail closed the dock too", size.name)
		}
	}
}

// TestShellDoesNotScroll: History → Audit → "Open its proposal in the
// dock" scrolls the dock's transcript, never the shell: the page stays at
// 0, the top bar and the dock's Close button stay in the window.
func TestShellDoesNotScroll(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/")
	p.viewport(1440, 900)
	p.openDock()
	// Enough earlier talk that the proposal is far down the transcript.
	for i := 0; i < 6; i++ {
		p.send(fmt.Sprintf("hello number %d", i))
		p.waitTurnEnd(i + 1)
	}
	p.send("e2e-launch the audit")
	p.waitJS(`document.querySelector('.proposal[data-state=required] button[data-action=confirm]') !== null`, "the proposal card")
	p.click(`.proposal button[data-action=confirm]`)
	p.waitJS(`document.querySelector('.proposal [data-result]') !== null`, "the confirmation result")
	p.click(".dock-toggle")
	eval[bool](p, `(window.studio.go('/history?tab=audit'), true)`)
	p.waitJS(`document.querySelector('[data-open-conversation]') !== null`, "the proposal row's link")
	p.click(`[data-open-conversation]`)
	p.waitJS(`document.querySelector('#app').classList.contains('dock-open') && document.querySelector('.proposal.highlight') !== null`, "the dock open on the proposal")
	p.shot("1440-audit-open-proposal")
	scrolled := eval[[]string](p, `[document.scrollingElement, ...document.querySelectorAll('#app, .workspace, .dock, body')].filter(e => e.scrollTop !== 0 || e.scrollLeft !== 0).map(e => e.id || e.className || e.tagName)`)
	if len(scrolled) > 0 {
		t.Errorf("the shell scrolled: %v", scrolled)
	}
	for _, sel := range []string{".topbar", ".dock [data-action=close-dock]", ".dock .composer textarea"} {
		if !eval[bool](p, inViewJS+`(document.querySelector('`+sel+`'))`) {
			t.Errorf("%s left the window: %v", sel, eval[any](p, `document.querySelector('`+sel+`').getBoundingClientRect().toJSON()`))
		}
	}
	if !eval[bool](p, inViewJS+`(document.querySelector('.proposal.highlight .proposal-summary'))`) {
		t.Errorf("the proposal the row names is not in view")
	}
}

// TestDesktopTablesAreNotClipped: at 1440×900 Schedules shows every
// column while nothing is selected, and the fleet keeps its Id column
// beside a run's detail.
func TestDesktopTablesAreNotClipped(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	appDo(t, d, "POST", "/api/app/schedules", map[string]any{"name": "weekday-morning-audit-of-the-api", "cron": "15 9 * * 1-5",
		"playbook": "audit-repo", "args": map[string]string{"repo": "acme/api"}, "enabled": true}, nil)
	id := launch(t, d, "acme/api")
	p := openPage(t, d, "/schedules")
	p.viewport(1440, 900)
	p.waitJS(`document.querySelectorAll('.list-pane tbody tr[data-key]').length === 2`, "the schedules")
	if got := eval[[]string](p, clippedJS); len(got) > 0 {
		t.Errorf("schedules at 1440 px: %v", got)
	}
	if !eval[bool](p, inViewJS+`([...document.querySelectorAll('.list-pane th')].find(th => th.innerText === 'Last run'))`) {
		t.Errorf("schedules at 1440 px: the Last run column is not in view")
	}
	p.shot("1440-schedules-nothing-selected")
	eval[bool](p, `(window.studio.go('/?view=fleet&run=`+id+`'), true)`)
	p.waitJS(`document.querySelector('.detail [data-run-status]') !== null && document.querySelectorAll('.list-pane tbody tr[data-key]').length === 1`, "the fleet beside a run's detail")
	if got := eval[[]string](p, clippedJS); len(got) > 0 {
		t.Errorf("the fleet beside a run's detail at 1440 px: %v", got)
	}
	if !eval[bool](p, inViewJS+`([...document.querySelectorAll('.list-pane th')].find(th => th.innerText === 'Id'))`) {
		t.Errorf("the fleet beside a run's detail: the Id column is not in view")
	}
	p.shot("1440-fleet-beside-run-detail")
}

// TestPhoneKeepsEverythingReachable: at 360, 390 and 430 px (and a
// tablet's 800) the lists
// (Fleet, Audit with its targets, Schedules with Next and Last run) clip
// nothing, the rail's icons carry their names, and the dock is a sheet that
// folds its conversation controls away and steps aside for an effect.
func TestPhoneKeepsEverythingReachable(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	src := axeSource(t)
	appDo(t, d, "POST", "/api/app/schedules", map[string]any{"name": "weekday-morning-audit-of-the-api", "cron": "15 9 * * 1-5",
		"playbook": "audit-repo", "args": map[string]string{"repo": "acme/api"}, "enabled": true}, nil)
	launch(t, d, "acme/api")
	launch(t, d, "acme/web")
	p := openPage(t, d, "/")
	views := []struct{ name, path, ready string }{
		{"fleet", "/?view=fleet", `document.querySelectorAll('.list-pane tbody tr[data-key]').length === 2`},
		{"audit", "/history?tab=audit", `document.querySelectorAll('.list-pane tbody tr[data-key]').length >= 3`},
		{"schedules", "/schedules", `document.querySelectorAll('.list-pane tbody tr[data-key]').length === 2`},
		{"history", "/history", `document.querySelectorAll('.list-pane tbody tr[data-key]').length === 2`},
		{"library", "/library", `document.querySelectorAll('.list-pane tbody tr[data-key]').length >= 2`},
	}
	// 800: a tablet, where the rail is a column of icons with their names.
	for _, w := range []int64{360, 390, 430, 800} {
		p.viewport(w, 844)
		for _, v := range views {
			eval[bool](p, `(window.studio.go('`+v.path+`'), true)`)
			p.waitJS(v.ready, fmt.Sprintf("%s at %d px", v.name, w))
			if got := eval[[]string](p, clippedJS); len(got) > 0 {
				t.Errorf("%s at %d px: %v", v.name, w, got)
			}
			if w == 390 {
				p.axeCheck(src, v.name+" as cards (phone)")
				p.shot("phone-list-" + v.name)
			}
			if w == 800 {
				p.shot("800-list-" + v.name)
			}
		}
		// The audit's targets read in full.
		eval[bool](p, `(window.studio.go('/history?tab=audit'), true)`)
		p.waitJS(`[...document.querySelectorAll('.list-pane td[data-label=Target]')].some(td => td.innerText.includes('audit-repo'))`, fmt.Sprintf("the audit's targets by name at %d px", w))
		// Every space's name shows under its icon, inside the window.
		labels := eval[[]string](p, railNamesHiddenJS)
		if len(labels) > 0 {
			t.Errorf("at %d px the rail hides or cuts the names %v", w, labels)
		}
	}

	// The dock on a phone: a sheet whose conversation controls fold away.
	p.viewport(390, 844)
	eval[bool](p, `(window.studio.go('/'), true)`)
	p.openDock()
	if h := eval[float64](p, `(() => { const c = document.querySelector('.dock-convs'); return c.getBoundingClientRect().height; })()`); h > 0 {
		t.Errorf("the conversation controls take %.0f px of the phone's dock before they are asked for", h)
	}
	p.send("e2e-launch the audit")
	p.waitJS(`document.querySelector('.proposal[data-state=required]') !== null`, "the proposal on a phone")
	// The proposal's target reads in full: wrapped, not cut.
	cut := eval[[]string](p, proposalFactsCutJS)
	if len(cut) > 0 {
		t.Errorf("the proposal's facts are cut on a phone: %q", cut)
	}
	p.shot("phone-dock-proposal")
	p.click(".dock-convs-toggle")
	p.waitJS(`document.querySelector('.dock-convs').getBoundingClientRect().height > 0`, "the conversation controls on request")
	p.shot("phone-dock-conversations")
	p.click(".dock-convs-toggle")
	p.click(`.proposal button[data-action=deny]`)
	p.waitTurnEnd(1)
	// Two proposals alike: each card is an article, not a second landmark
	// of the same name; axe finds nothing above minor in the sheet.
	p.send("e2e-launch the audit again: launch playbook audit-repo") // asking again lifts the denial's memory
	p.waitJS(`document.querySelectorAll('.proposal').length === 2 && document.querySelector('.proposal[data-state=required]') !== null`, "a second proposal like the first")
	p.axeCheck(src, "the dock's sheet with two like proposals (phone)")
	p.click(`.proposal[data-state=required] button[data-action=deny]`)
	p.waitTurnEnd(2)
	// A navigation effect: the sheet steps aside so the change is seen.
	p.send("e2e-go-fleet")
	p.waitJS(`location.search.includes('view=fleet') && document.querySelector('#app').classList.contains('dock-min')`, "the sheet minimised after the effect")
	if !eval[bool](p, inViewJS+`(document.querySelector('#space-title'))`) || !eval[bool](p, `document.elementFromPoint(195, 300)?.closest('#space') !== null`) {
		t.Errorf("with the sheet minimised the space is still covered")
	}
	if eval[float64](p, `document.querySelector('.dock').getBoundingClientRect().height`) > 120 {
		t.Errorf("the minimised sheet is %.0f px tall", eval[float64](p, `document.querySelector('.dock').getBoundingClientRect().height`))
	}
	p.axeCheck(src, "the minimised sheet over the fleet (phone)")
	p.shot("phone-dock-minimised")
	// Pulled up again by its grip.
	p.click(".dock-grip")
	p.waitJS(`!document.querySelector('#app').classList.contains('dock-min') && document.querySelector('.dock').getBoundingClientRect().height > 500`, "the sheet expanded")
	// And pulled down with a drag.
	eval[bool](p, `(() => { const g = document.querySelector('.dock-grip'); const r = g.getBoundingClientRect(); const x = r.left + r.width / 2, y = r.top + 5;
		g.dispatchEvent(new PointerEvent('pointerdown', { bubbles: true, clientX: x, clientY: y, pointerId: 7 }));
		g.dispatchEvent(new PointerEvent('pointermove', { bubbles: true, clientX: x, clientY: y + 120, pointerId: 7 }));
		g.dispatchEvent(new PointerEvent('pointerup', { bubbles: true, clientX: x, clientY: y + 200, pointerId: 7 })); return true; })()`)
	p.waitJS(`document.querySelector('#app').classList.contains('dock-min')`, "the sheet pulled down")
}

// TestDockKeys: Ctrl+. opens the dock with focus in it, Escape closes it
// and gives focus back; Ctrl+. from the page moves focus into an open dock.
func TestDockKeys(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/?view=fleet")
	p.viewport(1440, 900)
	p.waitJS(`document.querySelector('.tab[aria-selected=true]') !== null`, "the fleet")
	eval[bool](p, `(document.querySelector('.tab[aria-selected=true]').focus(), true)`)
	ctrlDot := func() {
		p.do(chromedp.KeyEvent(".", chromedp.KeyModifiers(2))) // 2: Ctrl
	}
	ctrlDot()
	p.waitJS(`document.querySelector('#app').classList.contains('dock-open') && document.activeElement.closest('.dock') !== null`, "Ctrl+. to open the dock with focus in it")
	p.do(chromedp.KeyEvent(kb.Escape))
	p.waitJS(`!document.querySelector('#app').classList.contains('dock-open') && document.activeElement.matches('.tab[aria-selected=true]')`, "Escape to close the dock, focus back on the tab")
	p.click(".dock-toggle")
	p.waitJS(`document.querySelector('#app').classList.contains('dock-open')`, "the dock opened by its button")
	eval[bool](p, `(document.querySelector('.tab[aria-selected=true]').focus(), true)`)
	ctrlDot()
	p.waitJS(`document.querySelector('#app').classList.contains('dock-open') && document.activeElement.closest('.dock') !== null`, "Ctrl+. to move focus into the open dock")
	ctrlDot()
	p.waitJS(`!document.querySelector('#app').classList.contains('dock-open')`, "Ctrl+. from the dock to close it")
}

// TestSignInByLinkWithoutReload: after a refused token, the printed
// #token= link opened in the same tab signs in (only the fragment changes:
// the page must listen for it).
func TestSignInByLinkWithoutReload(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	ctx, cancel := chromedp.NewContext(browser(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // the tab lives as long as ctx
		t.Fatal(err)
	}
	p := &page{t: t, ctx: ctx, d: d}
	p.do(chromedp.Navigate(d.URL + "/#token=not-the-token"))
	p.waitJS(`document.querySelector('form.signin .form-error')?.innerText.length > 0`, "the refusal on the sign-in form")
	eval[bool](p, `(window.stillThisPage = true, location.href = '`+d.URL+`/#token=`+d.Token+`', true)`)
	p.waitJS(`document.querySelector('.rail .rail-link') !== null`, "the cockpit after the link")
	if !eval[bool](p, `window.stillThisPage === true`) {
		t.Fatal("the page reloaded")
	}
	if strings.Contains(eval[string](p, `location.href`), "token") {
		t.Fatal("the token stayed in the address bar")
	}
}

// TestUnknownAddressGetsTheCockpitsPage: /nope shows the cockpit's own
// not-found page, in its shell, with the way to every space; the operator's
// navigation works from it.
func TestUnknownAddressGetsTheCockpitsPage(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	p := openPage(t, d, "/nope")
	p.waitJS(`document.querySelector('[data-not-found]') !== null`, "the not-found page")
	if got := eval[string](p, `document.querySelector('#space-title').innerText`); got != "Page not found" {
		t.Errorf("the heading reads %q", got)
	}
	if p.location() != "/nope" {
		t.Errorf("the address changed to %s", p.location())
	}
	if n := eval[int](p, `document.querySelectorAll('[data-not-found] a[href]').length`); n != 6 {
		t.Errorf("%d links to spaces", n)
	}
	p.axeCheck(axeSource(t), "the not-found page")
	p.shot("1440-not-found")
	p.click(`[data-not-found] a[href="/library"]`)
	p.waitJS(`location.pathname === '/library' && document.querySelectorAll('.list-pane tbody tr').length > 0`, "the library from the not-found page")
	// The operator can take a person away from a not-found page too.
	eval[bool](p, `(history.pushState(null, '', '/old/link'), dispatchEvent(new PopStateEvent('popstate')), true)`)
	p.waitJS(`document.querySelector('[data-not-found]') !== null`, "the not-found page after a popstate")
	p.openDock()
	p.send("e2e-go-fleet")
	p.waitJS(`location.search.includes('view=fleet') && document.querySelector('[data-not-found]') === null`, "the operator's navigation from the not-found page")
}

// TestFreshInstallSaysWhatToDo: with no runs, Mission's activity has no
// empty chart axes but says how to start; the fleet's empty list too.
func TestFreshInstallSaysWhatToDo(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	p := openPage(t, d, "/")
	p.viewport(1440, 900)
	p.waitJS(`document.querySelector('#charts-title') && !document.querySelector('.charts .loading')`, "the activity card")
	if n := eval[int](p, `document.querySelectorAll('.charts svg.chart').length`); n != 0 {
		t.Errorf("%d empty charts on a fresh install", n)
	}
	if !eval[bool](p, `!!document.querySelector('.charts a[href="/library"]')`) {
		t.Errorf("the activity card does not say where to start: %q", eval[string](p, `document.querySelector('.charts').innerText`))
	}
	p.shot("1440-fresh-mission")
	eval[bool](p, `(window.studio.go('/?view=fleet'), true)`)
	p.waitJS(`document.querySelector('.list-pane .empty') !== null`, "the empty fleet")
	if !eval[bool](p, `!!document.querySelector('.list-pane .empty a[href="/library"]')`) {
		t.Errorf("the empty fleet reads %q", eval[string](p, `document.querySelector('.list-pane .empty').innerText`))
	}
}

// TestPhoneAndTabletLists: on a phone the fleet's and the audit's filters
// fold behind a button (and open on request) and each row is a short card,
// so a screen shows many runs; the fleet says why a run failed in its row;
// on a tablet the subtitle and the search's words are not cut; Mission
// keeps inside the window at both widths.
func TestPhoneAndTabletLists(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, reviewScript)
	for i := range 12 {
		launch(t, d, fmt.Sprintf("acme/service-%02d", i))
	}
	failed := launch(t, d, "e2e-fail acme/legacy")
	waitRunsEnded(t, d)
	p := openPage(t, d, "/")
	p.viewport(390, 844)
	rowsOnScreen := `[...document.querySelectorAll('.list-pane tbody tr[data-key]')].filter(tr => tr.getBoundingClientRect().bottom <= innerHeight).length`
	for _, v := range []struct{ name, path string }{{"fleet", "/?view=fleet"}, {"audit", "/history?tab=audit"}} {
		eval[bool](p, `(window.studio.go('`+v.path+`'), true)`)
		p.waitJS(`document.querySelectorAll('.list-pane tbody tr[data-key]').length >= 10`, v.name)
		if h := eval[float64](p, `document.querySelector('#space .filters').getBoundingClientRect().height`); h > 60 {
			t.Errorf("%s on a phone: the filters take %.0f px before the list", v.name, h)
		}
		if n := eval[int](p, rowsOnScreen); n < 6 {
			t.Errorf("%s on a phone: %d rows on the first screen", v.name, n)
		}
		p.shot("phone-compact-" + v.name)
	}
	// The filters open on request.
	eval[bool](p, `(window.studio.go('/?view=fleet'), true)`)
	p.click(`.filters-toggle`)
	p.waitJS(inViewJS+`(document.querySelector('select[name=status]'))`, "the status filter, opened")
	if got := eval[string](p, `document.querySelector('.filters-toggle').getAttribute('aria-expanded')`); got != "true" {
		t.Errorf("the Filters button says aria-expanded=%s", got)
	}
	// The failed run's row says why.
	// The list may be loading again (a change from the stream): wait for the row.
	p.waitJS(`(document.querySelector('.list-pane tr[data-key="`+failed+`"] td[data-label=Error]')?.innerText || '').includes('503')`, "the failed run's error cell saying why")
	for _, w := range []int64{390, 800} {
		p.viewport(w, 900)
		eval[bool](p, `(window.studio.go('/'), true)`)
		p.waitJS(`document.querySelectorAll('figure.chart-figure').length === 3`, "mission")
		if over := eval[[]string](p, overflowJS); len(over) > 0 {
			t.Errorf("Mission at %d px: past the window's edge: %v", w, over)
		}
	}
	// A tablet: the subtitle wraps instead of being cut, the search's
	// placeholder fits its box.
	eval[bool](p, `(window.studio.go('/?view=fleet'), true)`)
	p.waitJS(`document.querySelector('#search-mission') !== null`, "the fleet's search")
	if !eval[bool](p, `(() => { const s = document.querySelector('.crumb .subtitle'); return getComputedStyle(s).display !== 'none' && s.scrollWidth <= s.clientWidth + 1; })()`) {
		t.Errorf("the subtitle is cut on a tablet")
	}
	if !eval[bool](p, `(() => { const i = document.querySelector('#search-mission'); const c = document.createElement('canvas').getContext('2d'); const cs = getComputedStyle(i);
		c.font = cs.font; const room = i.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight); return c.measureText(i.placeholder).width <= room; })()`) {
		t.Errorf("the search's placeholder is cut on a tablet")
	}
	p.shot("800-fleet-subtitle-search")
}
