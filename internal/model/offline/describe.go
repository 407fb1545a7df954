package offline

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// The describe functions turn a tool result into an honest sentence. They
// read the JSON the tools return, and say "none" rather than invent.

func str(m map[string]any, k string) string {
	if v, ok := m[k].(string); ok {
		return v
	}
	return ""
}

func num(m map[string]any, k string) float64 {
	if v, ok := m[k].(float64); ok {
		return v
	}
	return 0
}

func list(m map[string]any, k string) []map[string]any {
	arr, _ := m[k].([]any)
	out := make([]map[string]any, 0, len(arr))
	for _, v := range arr {
		if o, ok := v.(map[string]any); ok {
			out = append(out, o)
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func describeView(v map[string]any) string {
	s := fmt.Sprintf("You are in the %s space (route %s)", str(v, "space"), str(v, "route"))
	if sel, ok := v["selection"].(map[string]any); ok && len(sel) > 0 {
		keys := make([]string, 0, len(sel))
		for k, val := range sel {
			keys = append(keys, fmt.Sprintf("%s %v", k, val))
		}
		sort.Strings(keys)
		s += ", with " + strings.Join(keys, ", ") + " selected"
	}
	return s + "."
}

func describeHealth(v map[string]any) string {
	var b strings.Builder
	status := str(v, "status")
	if status == "" {
		status = "unknown"
	}
	fmt.Fprintf(&b, "System health: %s.", status)
	for _, c := range list(v, "checks") {
		if st := str(c, "status"); st != "" && st != "ok" {
			fmt.Fprintf(&b, " %s: %s (%s).", str(c, "name"), st, str(c, "detail"))
		}
	}
	if q, ok := v["runs"].(map[string]any); ok {
		fmt.Fprintf(&b, " Runs queued: %d, running: %d.", int(num(q, "queued")), int(num(q, "running")))
	}
	if ind := list(v, "indeterminateProposals"); len(ind) > 0 {
		fmt.Fprintf(&b, " %s need reconciliation.", plural(len(ind), "operator proposal", "operator proposals"))
	}
	return b.String()
}

func describeStats(status string) func(map[string]any) string {
	return func(v map[string]any) string {
		window := map[string]string{"24h": "the last 24 hours", "7d": "the last 7 days"}[str(v, "window")]
		total := int(num(v, "total"))
		counts, _ := v["counts"].(map[string]any)
		if status != "" {
			n := 0
			if c, ok := counts[status].(float64); ok {
				n = int(c)
			}
			return fmt.Sprintf("In %s, %s %s, out of %s in all.", window, plural(n, "run", "runs"), status, plural(total, "run", "runs"))
		}
		var parts []string
		for _, s := range []string{"succeeded", "failed", "running", "queued", "cancelled"} {
			if c, ok := counts[s].(float64); ok && c > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", int(c), s))
			}
		}
		if total == 0 {
			return fmt.Sprintf("There were no runs in %s.", window)
		}
		s := fmt.Sprintf("In %s there were %s: %s.", window, plural(total, "run", "runs"), strings.Join(parts, ", "))
		if med, ok := v["medianDurationMs"].(float64); ok {
			s += fmt.Sprintf(" The median run took %.1f s.", med/1000)
		}
		return s
	}
}

// clientNames name the clients that show no cockpit, in a sentence.
var clientNames = map[protocol.ClientKind]string{
	protocol.ClientCLI:  "the command line",
	protocol.ClientMCP:  "an MCP client",
	protocol.ClientText: "a text-only client",
}

// describeRuns lists runs: one line each, with the short id a person can
// paste; when there are more, where to see them all (the fleet, or on the
// command line the command that lists them).
func describeRuns(status string, client protocol.ClientKind) func(map[string]any) string {
	more := "\nThere are more; the fleet shows them all."
	if client == protocol.ClientCLI {
		cmd := "studio runs list"
		if status != "" {
			cmd += " --status " + status
		}
		more = "\nThere are more: `" + cmd + "` lists them all."
	} else if !client.AppliesEffects() {
		more = "\nThere are more; the cockpit's fleet shows them all."
	}
	return func(v map[string]any) string {
		runs := list(v, "runs")
		what := "runs"
		if status != "" {
			what = status + " runs"
		}
		if len(runs) == 0 {
			return "There are no " + what + "."
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s:", strings.ToUpper(what[:1])+what[1:])
		for _, r := range runs {
			fmt.Fprintf(&b, "\n- %s `%s` (%s)", str(r, "playbook"), shortID(str(r, "id")), str(r, "status"))
			if e := str(r, "error"); e != "" {
				fmt.Fprintf(&b, ": %s", e)
			}
		}
		if hasMore, _ := v["hasMore"].(bool); hasMore {
			b.WriteString(more)
		}
		return b.String()
	}
}

func describeRun(v map[string]any) string {
	s := fmt.Sprintf("Run `%s` of %s is %s.", shortID(str(v, "id")), str(v, "playbookName"), str(v, "status"))
	if e, ok := v["error"].(map[string]any); ok {
		s += fmt.Sprintf(" Error: %s: %s.", str(e, "code"), str(e, "message"))
	}
	if out := str(v, "output"); out != "" {
		if len(out) > 400 {
			out = out[:400] + "…"
		}
		s += "\n\nOutput:\n" + out
	}
	return s
}

func names(items []map[string]any) string {
	var ns []string
	for _, it := range items {
		n := str(it, "name")
		if d := str(it, "description"); d != "" {
			n += " — " + d
		}
		ns = append(ns, "- "+n)
	}
	return strings.Join(ns, "\n")
}

func describePlaybooks(v map[string]any) string {
	ps := list(v, "playbooks")
	if len(ps) == 0 {
		return "There are no playbooks yet."
	}
	return "Playbooks:\n" + names(ps)
}

func describePlaybook(v map[string]any) string {
	s := fmt.Sprintf("Playbook %s (version %d): %s", str(v, "name"), int(num(v, "version")), str(v, "description"))
	var args []string
	for _, a := range list(v, "args") {
		n := str(a, "name")
		if req, _ := a["required"].(bool); req {
			n += " (required)"
		}
		args = append(args, n)
	}
	if len(args) > 0 {
		s += "\nArguments: " + strings.Join(args, ", ")
	}
	return s
}

func describeWorkflows(v map[string]any) string {
	ws := list(v, "workflows")
	if len(ws) == 0 {
		return "There are no workflows yet."
	}
	return "Workflows:\n" + names(ws)
}

func describeSchedules(v map[string]any) string {
	ss := list(v, "schedules")
	if len(ss) == 0 {
		return "There are no schedules yet."
	}
	var b strings.Builder
	b.WriteString("Schedules:")
	for _, s := range ss {
		state := "enabled"
		if en, _ := s["enabled"].(bool); !en {
			state = "paused"
		}
		fmt.Fprintf(&b, "\n- %s: `%s` runs %s (%s)", str(s, "name"), str(s, "cron"), str(s, "playbookName"), state)
	}
	return b.String()
}

func describeAudit(v map[string]any) string {
	es := list(v, "events")
	if len(es) == 0 {
		return "The audit trail is empty."
	}
	var b strings.Builder
	b.WriteString("Recent audit events:")
	for _, e := range es {
		fmt.Fprintf(&b, "\n- %s by %s", str(e, "action"), str(e, "actor"))
		if d, ok := e["details"].(map[string]any); ok {
			if ct := str(d, "command_type"); ct != "" {
				fmt.Fprintf(&b, ": %s %s", ct, str(d, "decision"))
			} else if ct := str(d, "commandType"); ct != "" {
				fmt.Fprintf(&b, ": %s", ct)
			}
		}
	}
	return b.String()
}

// Schedules: "draft a schedule for audit every weekday at 9".

var (
	reAt       = regexp.MustCompile(`\bat (\d{1,2})(?::(\d{2}))?\s*(am|pm)?\b`)
	reFor      = regexp.MustCompile(`\b(?:for|of|running|to run)\s+(?:the\s+)?["']?([a-z0-9][a-z0-9._-]*)["']?`)
	dayNumbers = map[string]string{"sunday": "0", "monday": "1", "tuesday": "2", "wednesday": "3", "thursday": "4", "friday": "5", "saturday": "6"}
)

// cronFor turns "every weekday at 9", "nightly", "every monday at 8:30pm",
// "hourly" into a 5-field cron expression and a name suffix.
func cronFor(s string) (cron, label string) {
	minute, hour := "0", "9"
	if m := reAt.FindStringSubmatch(s); m != nil {
		h, _ := strconv.Atoi(m[1])
		if m[3] == "pm" && h < 12 {
			h += 12
		}
		if m[3] == "am" && h == 12 {
			h = 0
		}
		hour = strconv.Itoa(h % 24)
		if m[2] != "" {
			mm, _ := strconv.Atoi(m[2])
			minute = strconv.Itoa(mm % 60)
		}
	} else if strings.Contains(s, "nightly") || strings.Contains(s, "night") {
		hour = "2"
	}
	at := fmt.Sprintf("%02s%02s", hour, minute)
	switch {
	case strings.Contains(s, "hourly") || strings.Contains(s, "every hour"):
		return minute + " * * * *", "hourly"
	case strings.Contains(s, "weekday"):
		return fmt.Sprintf("%s %s * * 1-5", minute, hour), "weekdays-" + at
	case strings.Contains(s, "weekend"):
		return fmt.Sprintf("%s %s * * 0,6", minute, hour), "weekends-" + at
	}
	for day, n := range dayNumbers {
		if strings.Contains(s, day) {
			return fmt.Sprintf("%s %s * * %s", minute, hour, n), day + "s-" + at
		}
	}
	if strings.Contains(s, "nightly") || strings.Contains(s, "night") {
		return fmt.Sprintf("%s %s * * *", minute, hour), "nightly"
	}
	return fmt.Sprintf("%s %s * * *", minute, hour), "daily-" + at
}

func parseDraftSchedule(s string) draftSchedule {
	cron, label := cronFor(s)
	word := ""
	if m := reFor.FindStringSubmatch(s); m != nil && m[1] != "every" && m[1] != "each" && m[1] != "a" {
		word = m[1]
	}
	return draftSchedule{word: word, cron: cron, label: label}
}

// proposed is the draft for a client without a form to prefill: the
// schedule is proposed (paused, so that confirming it launches nothing
// before the person looks at it), once the playbook is found.
func (in draftSchedule) proposed() intent {
	if in.word == "" {
		return answer{"Which playbook should the schedule launch? Say \"draft a schedule for audit-repo every weekday at 9\"."}
	}
	return lookupThen{lookup: call("list_playbooks", map[string]any{"query": in.word}),
		pick: func(v map[string]any) (model.ToolCall, string, bool) {
			ps := list(v, "playbooks")
			if len(ps) == 0 {
				return model.ToolCall{}, fmt.Sprintf("I found no playbook matching %q, so I did not draft the schedule. \"list playbooks\" shows what exists.", in.word), false
			}
			name := str(ps[0], "name") + "-" + in.label
			return call("create_schedule", map[string]any{"name": name, "cron": in.cron, "playbook": str(ps[0], "name"), "enabled": false}),
				fmt.Sprintf("create the schedule %s launching %s at `%s` (UTC), paused", name, str(ps[0], "name"), in.cron), true
		}}
}

// draftSchedule finds the playbook the operator named, then prefills the
// schedule form for them to review.
type draftSchedule struct {
	word, cron, label string
}

func (in draftSchedule) next(results []result) Step {
	switch len(results) {
	case 0:
		if in.word == "" {
			return in.prefill("")
		}
		return Step{Calls: []model.ToolCall{call("list_playbooks", map[string]any{"query": in.word})}}
	case 1:
		if r, bad := anyFailed(results); bad {
			return failed(r)
		}
		if results[0].tool != "list_playbooks" {
			return in.done(results[0])
		}
		ps := list(results[0].value, "playbooks")
		if len(ps) == 0 {
			return Step{Text: fmt.Sprintf("I found no playbook matching %q, so I did not draft the schedule. \"list playbooks\" shows what exists.", in.word)}
		}
		return in.prefill(str(ps[0], "name"))
	default:
		return in.done(results[len(results)-1])
	}
}

func (in draftSchedule) prefill(playbook string) Step {
	values := map[string]any{"cron": in.cron, "enabled": true}
	name := in.label
	if playbook != "" {
		values["playbook"] = playbook
		name = playbook + "-" + in.label
	}
	values["name"] = name
	return Step{Calls: []model.ToolCall{call("prefill_form", map[string]any{"form": "schedule", "values": values})}}
}

func (in draftSchedule) done(r result) Step {
	if !r.ok {
		return failed(r)
	}
	return Step{Text: fmt.Sprintf("I asked the cockpit to open the schedule form prefilled with cron `%s`. Nothing is created until you review and submit it.", in.cron)}
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
