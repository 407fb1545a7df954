package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
)

// How the frames of a conversation read on a terminal: the operator's
// text as text, a proposal as a card with the exact commands that confirm
// or deny it, an effect as one line saying what the cockpit was asked and
// that nothing was applied here, a decision as one line. Tool calls and
// their results are the model's plumbing: a terminal shows only a tool
// that failed (-o json has every frame).

// frameWriter writes frames for people, or as JSON lines when raw.
type frameWriter struct {
	w   io.Writer
	raw bool
	// transcript also writes the person's instructions and each turn's
	// end with its sequence (conversations show; fork's --up-to).
	transcript bool
	now        func() time.Time

	midLine  bool              // the last text written did not end its line
	tools    map[string]string // tool of each call id seen
	lastCall string            // the newest call id, whose proposal may follow
	proposed map[string]bool   // call ids that became proposals: their result is the decision's
}

func newFrameWriter(w io.Writer, raw, transcript bool) *frameWriter {
	return &frameWriter{w: w, raw: raw, transcript: transcript, now: time.Now, tools: map[string]string{}, proposed: map[string]bool{}}
}

// line starts a block on a line of its own.
func (fw *frameWriter) line() {
	if fw.midLine {
		fmt.Fprintln(fw.w)
		fw.midLine = false
	}
}

func (fw *frameWriter) write(f protocol.Frame) {
	if fw.raw {
		b, _ := protocol.EncodeFrame(f)
		if rb, err := readableTimes(b); err == nil {
			b = rb
		}
		fmt.Fprintln(fw.w, string(b))
		return
	}
	switch p := f.Payload.(type) {
	case protocol.TextPayload:
		if p.Role == protocol.RoleUser {
			if fw.transcript {
				fw.line()
				fmt.Fprintf(fw.w, "\n> %s\n\n", p.Content)
			}
			return
		}
		if p.Content != "" {
			fmt.Fprint(fw.w, p.Content)
			fw.midLine = !strings.HasSuffix(p.Content, "\n")
		}
	case protocol.ToolCallPayload:
		fw.tools[p.CallID] = p.Tool
		fw.lastCall = p.CallID
	case protocol.ToolResultPayload:
		if !p.OK && p.Error != nil && !fw.proposed[p.CallID] {
			fw.line()
			fmt.Fprintf(fw.w, "  %s failed (%s): %s\n", orWord(fw.tools[p.CallID], "a tool"), p.Error.Code, p.Error.Message)
		}
	case protocol.UICommandPayload:
		fw.line()
		fmt.Fprintf(fw.w, "  %s — not applied here\n", effectWords(p.Effect))
	case protocol.ProposalPayload:
		fw.proposed[fw.lastCall] = true
		fw.line()
		fw.card(p.Proposal)
	case protocol.ConfirmationPayload:
		if p.State == protocol.ConfirmationRequired {
			return // the card says how to decide
		}
		fw.line()
		fmt.Fprintf(fw.w, "  proposal %s %s", shortID(p.ProposalID), decisionWords[p.State])
		if p.DecidedBy != "" {
			fmt.Fprintf(fw.w, " by %s", p.DecidedBy)
		}
		fmt.Fprintln(fw.w)
	case protocol.ErrorPayload:
		fw.line()
		fmt.Fprintf(fw.w, "error (%s): %s\n", p.Error.Code, p.Error.Message)
	case protocol.DonePayload:
		fw.line()
		switch {
		case fw.transcript:
			fmt.Fprintf(fw.w, "  — turn %s (#%d)\n", p.Outcome, f.Sequence)
		case p.Outcome != protocol.OutcomeCompleted:
			fmt.Fprintf(fw.w, "  — turn %s\n", p.Outcome)
		}
	}
}

// decisionWords say what became of a proposal.
var decisionWords = map[protocol.ConfirmationState]string{
	protocol.ConfirmationConfirmed: "confirmed",
	protocol.ConfirmationExecuted:  "executed",
	protocol.ConfirmationDenied:    "denied: nothing changed",
	protocol.ConfirmationExpired:   "expired: nothing changed",
	protocol.ConfirmationFailed:    "failed",
	protocol.ConfirmationAmended:   "amended: replaced by the edited proposal",
}

// card writes a proposal for a person to decide: what it does, its risk,
// target and expiry, and the commands that confirm or deny it.
func (fw *frameWriter) card(p protocol.CommandProposal) {
	fmt.Fprintf(fw.w, "\nPROPOSAL (%s) %s\n", p.Risk, p.Summary)
	kv := []string{"id", p.ID}
	if p.Target != nil {
		kv = append(kv, "target", targetWords(p.Target, p.TargetName))
	}
	if p.Impact != "" {
		kv = append(kv, "impact", p.Impact)
	}
	kv = append(kv, "expires", expiryWords(p.ExpiresAt, fw.now()),
		"confirm", "studio operator confirm "+p.ID,
		"deny", "studio operator deny "+p.ID)
	fields(&indent{w: fw.w, prefix: "  "}, kv...)
	fmt.Fprintln(fw.w)
}

// indent prefixes every line written through it (tabwriter writes a
// line in several pieces).
type indent struct {
	w       io.Writer
	prefix  string
	midLine bool
}

func (in *indent) Write(b []byte) (int, error) {
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l == "" {
			continue
		}
		if !in.midLine {
			l = in.prefix + l
		}
		if _, err := io.WriteString(in.w, l); err != nil {
			return 0, err
		}
		in.midLine = !strings.HasSuffix(l, "\n")
	}
	return len(b), nil
}

// targetWords is a proposal's target for a person: kind, name, version.
func targetWords(t *protocol.ResourceVersion, name string) string {
	if name == "" {
		name = t.ID
	}
	return fmt.Sprintf("%s %s (version %s)", t.Kind, name, t.Version)
}

// expiryWords is when a proposal expires: how long from now, and when.
func expiryWords(expiresAt float64, now time.Time) string {
	at := protocol.Time(expiresAt)
	if left := at.Sub(now); left > 0 {
		return fmt.Sprintf("in %s, at %s", left.Truncate(time.Second), at.Format(time.RFC3339))
	}
	return "at " + at.Format(time.RFC3339) + " (passed)"
}

// effectWords says what an effect asked the cockpit to do: "asked the
// cockpit to open Fleet (failed runs)".
func effectWords(e protocol.Effect) string {
	switch e.Kind {
	case protocol.EffectNavigate:
		return "asked the cockpit to open " + placeWords(e.Space, e.Params)
	case protocol.EffectSelect:
		return "asked the cockpit to select " + pairs(e.Selection) + " in " + spaceTitle(e.Space)
	case protocol.EffectTheme:
		return "asked the cockpit to switch to the " + e.Theme + " theme"
	case protocol.EffectPrefill:
		values := map[string]string{}
		for k, v := range e.Values {
			values[k] = fmt.Sprint(v)
		}
		return "asked the cockpit to open the " + e.Form + " form filled in with " + pairs(values)
	}
	return "asked the cockpit for a " + e.Kind
}

// placeWords names a space and its parameters as the cockpit shows them:
// Fleet (failed runs), History (audit), Schedules (enabled true).
func placeWords(space string, params map[string]any) string {
	rest := maps.Clone(params)
	title := spaceTitle(space)
	if space == "mission" && rest["view"] == "fleet" {
		title = "Fleet"
		delete(rest, "view")
	}
	var details []string
	if st, ok := rest["status"].(string); ok && title == "Fleet" {
		details = append(details, st+" runs")
		delete(rest, "status")
	}
	for _, k := range slices.Sorted(maps.Keys(rest)) {
		details = append(details, fmt.Sprintf("%s %v", k, rest[k]))
	}
	if len(details) == 0 {
		return title
	}
	return title + " (" + strings.Join(details, ", ") + ")"
}

// spaceTitle is a space's title in the cockpit (its id when unknown).
func spaceTitle(id string) string {
	for _, s := range spaces.Default.Spaces {
		if s.ID == id {
			return s.Title
		}
	}
	return id
}

// pairs is k v, k v in key order.
func pairs(m map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+" "+m[k])
	}
	return strings.Join(out, ", ")
}

func orWord(s, word string) string {
	if s == "" {
		return word
	}
	return s
}

// shortID is the 8 characters of an id the cockpit shows.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
