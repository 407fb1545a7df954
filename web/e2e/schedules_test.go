package e2e_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/studio/operator/internal/protocol"
)

// timeZone makes the page's clock a zone's (as a browser there has it).
func (p *page) timeZone(id string) {
	p.t.Helper()
	p.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: id})
		return err
	}))
}

type scheduleView struct {
	Cron    string            `json:"cron"`
	Enabled bool              `json:"enabled"`
	Args    map[string]string `json:"args"`
	Version int               `json:"version"`
}

// TestScheduleEditedInTheCockpit: moving the nightly run to 04:00 is an
// edit, not a delete and a new one: the cron (its next runs previewed in
// UTC, the cron's zone, with the browser's beside), the playbook's
// arguments and enabled change in one form; the server has them.
func TestScheduleEditedInTheCockpit(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	p := openPage(t, d, "/")
	p.timeZone("America/New_York")
	eval[bool](p, `(window.studio.go('/schedules?schedule=nightly-audit'), true)`)
	p.waitJS(`document.querySelector('[data-action=edit-schedule]') !== null`, "the schedule's detail")
	p.click(`[data-action=edit-schedule]`)
	p.waitJS(`document.querySelector('form[data-form=schedule] input[name=arg-repo]')?.value === 'main'`, "the edit form with the schedule's arguments")
	p.setValue(`form[data-form=schedule] input[name=cron]`, "0 4 * * *")
	p.waitJS(`[...document.querySelectorAll('form[data-form=schedule] .cron-next li')].every(li => /04:00 AM UTC \((11:00 PM|Mon|Tue|Wed|Thu|Fri|Sat|Sun).*E[SD]T\)/.test(li.innerText)) && document.querySelectorAll('form[data-form=schedule] .cron-next li').length === 5`, "the next runs at 04:00 UTC, with New York's time beside")
	p.setValue(`form[data-form=schedule] input[name=arg-repo]`, "acme/web")
	eval[bool](p, `(document.querySelector('form[data-form=schedule] input[name=enabled]').click(), true)`)
	p.shot("schedule-edit")
	p.click(`form[data-form=schedule] button[type=submit]`)
	p.waitJS(`document.querySelector('[data-cron]')?.innerText === '0 4 * * *' && document.querySelector('[data-schedule-state]')?.dataset.scheduleState === 'enabled'`, "the saved schedule's detail")
	var s scheduleView
	appDo(t, d, "GET", "/api/app/schedules/nightly-audit", nil, &s)
	if s.Cron != "0 4 * * *" || !s.Enabled || s.Args["repo"] != "acme/web" {
		t.Fatalf("the schedule on the server: %+v", s)
	}
	// One row, not a new schedule beside the old one.
	if n := eval[int](p, `document.querySelectorAll('.list-pane tbody tr[data-key]').length`); n != 1 {
		t.Fatalf("%d schedules listed after the edit", n)
	}
}

// TestOneTimeZoneSetting: times show in the chosen zone (UTC or this
// browser's), each with its zone's name, remembered across a reload; a
// cron shows in UTC with the chosen zone beside.
func TestOneTimeZoneSetting(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	run := launch(t, d, "acme/api")
	p := openPage(t, d, "/")
	p.timeZone("Asia/Kolkata")
	zoneTimes := `[...document.querySelectorAll('#space .timeline time, #space dd')].map(e => e.innerText).filter(s => /\d\d:\d\d/.test(s))`
	show := func(want *regexp.Regexp) {
		t.Helper()
		eval[bool](p, `(window.studio.go('/?view=fleet&run=`+run+`'), true)`)
		p.waitJS(`document.querySelector('.timeline time') !== null`, "the run's timeline")
		times := eval[[]string](p, zoneTimes)
		if len(times) < 2 {
			t.Fatalf("times found: %q", times)
		}
		for _, s := range times {
			if !want.MatchString(s) {
				t.Errorf("a time without its zone %s: %q", want, s)
			}
		}
	}
	show(regexp.MustCompile(`GMT\+5:30|IST`))
	eval[bool](p, `(window.studio.go('/system?tab=appearance'), true)`)
	p.click(`[data-time-zone] input[value=utc]`)
	p.waitJS(`localStorage.getItem('studio.timezone') === 'utc'`, "the setting remembered")
	show(regexp.MustCompile(`UTC`))
	p.do(chromedp.Reload())
	p.waitJS(`document.querySelector('.rail .rail-link') !== null`, "the cockpit after a reload")
	show(regexp.MustCompile(`UTC`))
	// The cron's next runs: in UTC, and nothing else when UTC is chosen.
	eval[bool](p, `(window.studio.go('/schedules?schedule=nightly-audit'), true)`)
	p.waitJS(`document.querySelectorAll('.cron-next li').length === 5`, "the next runs")
	if got := eval[string](p, `document.querySelector('.cron-next li').innerText`); !strings.Contains(got, "02:00") || !strings.Contains(got, "UTC") || strings.Contains(got, "IST") || strings.Contains(got, "GMT+5") {
		t.Fatalf("the next run reads %q", got)
	}
	eval[bool](p, `(window.studio.go('/system?tab=appearance'), true)`)
	p.click(`[data-time-zone] input[value=local]`)
	eval[bool](p, `(window.studio.go('/schedules?schedule=nightly-audit'), true)`)
	p.waitJS(`/02:00.*UTC.*\(.*(07:30|7:30).*(GMT\+5:30|IST)\)/.test(document.querySelector('.cron-next li')?.innerText || '')`, "the next run in UTC with Kolkata's time beside")
	p.shot("times-local-kolkata")
}

// TestViewerSchedulesControlsHeld: a viewer's schedule switches and Pause
// are disabled, each with the reason (its tooltip and its accessible
// description, the note at the top of the space), and nothing changes.
func TestViewerSchedulesControlsHeld(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, failingModel)
	src := axeSource(t)
	vic := addPrincipal(t, d, "vic", protocol.RoleViewer)
	p := openPageAs(t, d, "/schedules?schedule=nightly-audit", vic)
	// The switches and the detail's Pause/Enable (found by their words).
	controls := `[...document.querySelectorAll('#space input[role=switch]'), ...[...document.querySelectorAll('#space .detail .actions button')].filter(b => /^(Pause|Enable|Edit)$/.test(b.innerText.trim()))]`
	p.waitJS(controls+`.length >= 2`, "the schedules and the detail's buttons")
	p.waitJS(`document.querySelector('#space [data-read-only]') !== null`, "the read-only note")
	held := eval[[]string](p, controls+`.map(el => {
		const note = document.getElementById((el.getAttribute('aria-describedby') || '').split(' ').pop());
		return el.disabled && /needs the operator role/i.test(el.title) && note && /viewer/.test(note.innerText) ? '' : (el.getAttribute('aria-label') || el.innerText) + ': disabled ' + el.disabled + ', title ' + el.title;
	}).filter(Boolean)`)
	if len(held) > 0 {
		t.Fatalf("controls a viewer may not use: %q", held)
	}
	p.axeCheck(src, "a viewer's schedules")
	p.shot("viewer-schedules-held")
	// Clicking a held switch changes nothing.
	eval[bool](p, `(document.querySelector('#space input[role=switch]').click(), true)`)
	var s scheduleView
	appDo(t, d, "GET", "/api/app/schedules/nightly-audit", nil, &s)
	if s.Enabled || s.Version != 1 {
		t.Fatalf("the viewer's click changed the schedule: %+v", s)
	}
}
