package e2e_test

import (
	"fmt"
	"testing"
)

func TestZZScratchMeasure(t *testing.T) {
	d := startDaemon(t, operatorScript)
	for i := 0; i < 12; i++ {
		launch(t, d, fmt.Sprintf("acme/repo-%02d", i))
	}
	p := openPage(t, d, "/")
	for _, w := range []int64{390, 800} {
		p.viewport(w, 844)
		for _, path := range []string{"/", "/?view=fleet", "/history?tab=audit", "/schedules", "/library", "/designer", "/system", "/history"} {
			eval[bool](p, `(window.studio.go('`+path+`'), true)`)
			p.waitJS(`!document.querySelector('#space .loading')`, "loaded")
			p.waitJS(`document.querySelectorAll('#space .card, #space table').length > 0`, "content")
			out := eval[[]string](p, `(() => { const out = []; for (const e of document.querySelectorAll('body *')) { const r = e.getBoundingClientRect(); if (r.width === 0) continue; if (e.closest('.table-wrap, .chart-data, dialog')) continue; if (r.right > innerWidth + 1) out.push(e.tagName + '.' + e.className + ' ' + Math.round(r.left) + '-' + Math.round(r.right)); } return out.slice(0, 12); })()`)
			t.Logf("%d %s: %d over: %v", w, path, len(out), out)
			t.Logf("filters height %v", eval[float64](p, `(document.querySelector('#space .filters')||{getBoundingClientRect:()=>({height:0})}).getBoundingClientRect().height`))
			p.shot(fmt.Sprintf("scratch-%d-%s", w, sanitize(path)))
		}
	}
}
