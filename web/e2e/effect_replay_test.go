package e2e_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestSecondBrowserNeverReappliesAnEffect: browser A applies a navigate
// effect and acknowledges it; browser B (another profile: no shared effect
// log) opens the dock on the same conversation. B learns from the server
// that the effect was applied elsewhere: it stays where it is, sends no
// acknowledgement, and says "applied in another window" rather than "not
// applied".
func TestSecondBrowserNeverReappliesAnEffect(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, operatorScript)
	a := openPage(t, d, "/library")
	a.openDock()
	a.send("e2e-go-fleet")
	a.waitJS(`location.pathname + location.search === '/?view=fleet&status=failed'`, "the effect applied in browser A")
	a.waitEffectAcked("applied")
	a.waitJS(`document.querySelector('.transcript .done') !== null`, "the turn to end in A")
	conv := a.conversationID()

	b := openPage(t, d, "/history")
	b.openDock()
	b.waitJS(fmt.Sprintf(`window.studio.dock.conv && window.studio.dock.conv.id === %q`, conv), "browser B on the same conversation")
	b.waitJS(`document.querySelector('.effect-status') && !['pending'].includes(document.querySelector('.effect-status').dataset.effectStatus)`, "B's label of the effect")
	label := eval[string](b, `document.querySelector('.effect-status').innerText`)
	b.shot("effect-applied-in-another-window")
	if loc := b.location(); loc != "/history" {
		t.Fatalf("browser B moved to %s: it re-applied an effect browser A had applied", loc)
	}
	if n := eval[int](b, `window.studio.dock.appliedCount`); n != 0 {
		t.Fatalf("browser B applied %d effects", n)
	}
	if !strings.Contains(label, "applied in another window") || strings.Contains(label, "not applied") {
		t.Fatalf("browser B labels A's applied effect %q", label)
	}
	if n := len(regexp.MustCompile(`route=\S+/effects/\{eid\}/ack path=\S+ status=409`).FindAllString(d.logs(), -1)); n != 0 {
		t.Fatalf("browser B sent %d refused acknowledgements", n)
	}
}
