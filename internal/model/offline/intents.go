package offline

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

var runStatuses = map[string]string{
	"failed": "failed", "failing": "failed", "failure": "failed", "failures": "failed", "broken": "failed", "errored": "failed",
	"running": "running", "active": "running", "in progress": "running",
	"queued": "queued", "waiting": "queued", "pending": "queued",
	"succeeded": "succeeded", "successful": "succeeded", "passed": "succeeded", "completed": "succeeded", "green": "succeeded",
	"cancelled": "cancelled", "canceled": "cancelled", "aborted": "cancelled",
}

// spaceWords name the cockpit's places: the cockpit opens them; a client
// without a cockpit is given what they show instead (data).
var spaceWords = []struct {
	re    *regexp.Regexp
	space string
	param map[string]any
	label string
	data  func(client protocol.ClientKind) intent
}{
	{regexp.MustCompile(`\b(fleet|all runs|the runs|runs table|list of runs)\b`), "mission", map[string]any{"view": "fleet"}, "the fleet of runs", recentRuns},
	{regexp.MustCompile(`\b(audit trail|audit log|audit events?)\b`), "history", map[string]any{"tab": "audit"}, "the audit trail",
		reading("list_audit_events", map[string]any{"limit": 10}, describeAudit)},
	{regexp.MustCompile(`\b(mission|overview|dashboard|home)\b`), "mission", nil, "the mission overview",
		reading("run_stats", map[string]any{"window": "24h"}, describeStats(""))},
	{regexp.MustCompile(`\b(designer|workflows?|workflow editor)\b`), "designer", nil, "the designer",
		reading("list_workflows", map[string]any{}, describeWorkflows)},
	{regexp.MustCompile(`\b(library|playbooks?)\b`), "library", nil, "the library", reading("list_playbooks", map[string]any{}, describePlaybooks)},
	{regexp.MustCompile(`\b(history|finished runs|past runs)\b`), "history", nil, "history", recentRuns},
	{regexp.MustCompile(`\b(schedules?|cron|scheduler)\b`), "schedules", nil, "the schedules", reading("list_schedules", map[string]any{}, describeSchedules)},
	{regexp.MustCompile(`\b(system|settings|maintenance)\b`), "system", nil, "the system space", reading("system_health", map[string]any{}, describeHealth)},
}

// reading is a data intent that reads one tool, for any client.
func reading(tool string, args map[string]any, describe func(map[string]any) string) func(protocol.ClientKind) intent {
	return func(protocol.ClientKind) intent { return single{tool, args, describe} }
}

// recentRuns lists the newest runs.
func recentRuns(client protocol.ClientKind) intent {
	return single{"list_runs", map[string]any{"limit": 20}, describeRuns("", client)}
}

var (
	reTheme     = regexp.MustCompile(`\b(dark|light)\s*(mode|theme)?\b`)
	reThemeVerb = regexp.MustCompile(`\b(switch|turn|change|set|use|go|enable|make)\b|\b(mode|theme)\b`)
	reOpen      = regexp.MustCompile(`^(please\s+)?(open|go to|goto|show me|show|take me to|navigate to|switch to|bring up|display|view)\b`)
	reCount     = regexp.MustCompile(`\b(how many|count|number of|stats|statistics)\b`)
	reDay       = regexp.MustCompile(`\b(today|last day|past day|24 ?h(ours)?|yesterday|last 24)\b`)
	reWeek      = regexp.MustCompile(`\b(week|7 ?d(ays)?|seven days)\b`)
	reHealth    = regexp.MustCompile(`\b(health|healthy|doctor|status of the system|system status|is everything (ok|okay|fine|alright))\b`)
	reList      = regexp.MustCompile(`^(please\s+)?(list|what|which|tell me|give me)\b`)
	reWhatFail  = regexp.MustCompile(`\bwhat (failed|broke)\b|\bwhich runs failed\b|\blist (the )?failed\b`)
	reDraft     = regexp.MustCompile(`\b(draft|prefill|prepare|set up|new)\b.*\bschedule\b|\bschedule\b.*\b(every|each|daily|nightly|hourly|weekly|weekday)`)
	reWhere     = regexp.MustCompile(`\b(where am i|what am i looking at|current view|what is selected|what's selected)\b`)
	reHelp      = regexp.MustCompile(`^(help|\?|what can you do|what do you do)\b`)
	reGreeting  = regexp.MustCompile(`^(hi|hello|hey|good (morning|afternoon|evening))\b`)
	reRunID     = regexp.MustCompile(`\brun\s+([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b`)
	rePlaybook  = regexp.MustCompile(`\bplaybook\s+(?:named\s+|called\s+)?["']?([a-z0-9][a-z0-9._-]*)["']?`)
)

// normalize lowercases and trims an instruction.
func normalize(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimRight(s, ".!?")
	return strings.Join(strings.Fields(s), " ")
}

// parse maps an instruction to an intent, or nil when it is not understood.
// A client that applies no effects (the command line, an MCP client) is
// answered with the data a navigation would have shown, and drafts become
// proposals.
func parse(instr string, view *protocol.ContextSnapshot, client protocol.ClientKind) intent {
	s := normalize(instr)
	if s == "" {
		return nil
	}
	effects := client.AppliesEffects()
	if in := parseChange(s); in != nil {
		return in
	}
	switch {
	case reHelp.MatchString(s):
		return answer{notUnderstoodHelp}
	case reGreeting.MatchString(s) && len(strings.Fields(s)) <= 4:
		return answer{"Hello. I am the offline operator: I can show and count runs, open any space, report health, and propose changes for you to confirm. What do you need?"}
	case reWhere.MatchString(s) && !effects:
		return answer{"You are talking to me from " + clientNames[client] + ", not the cockpit, so there is no view or selection here. " +
			"Ask for what you want to see (\"show the failed runs\", \"list schedules\") and I will answer with it."}
	case reWhere.MatchString(s):
		return single{"get_current_view", map[string]any{}, describeView}
	case reTheme.MatchString(s) && reThemeVerb.MatchString(s) && !effects:
		return answer{"The theme is a setting of the cockpit, and " + clientNames[client] + " has none to switch: say \"dark mode\" in the cockpit's dock."}
	case reTheme.MatchString(s) && reThemeVerb.MatchString(s):
		theme := reTheme.FindStringSubmatch(s)[1]
		return effect{call("set_theme", map[string]any{"theme": theme}), "switch to the " + theme + " theme"}
	case reDraft.MatchString(s):
		d := parseDraftSchedule(s)
		if !effects {
			return d.proposed()
		}
		return d
	case reHealth.MatchString(s):
		return single{"system_health", map[string]any{}, describeHealth}
	case reCount.MatchString(s) && strings.Contains(s, "run"):
		window := "24h"
		if reWeek.MatchString(s) {
			window = "7d"
		}
		return single{"run_stats", map[string]any{"window": window}, describeStats(statusIn(s))}
	case reWhatFail.MatchString(s):
		args := map[string]any{"status": "failed", "limit": 10}
		if reDay.MatchString(s) {
			args["since"] = "24h"
		} else if reWeek.MatchString(s) {
			args["since"] = "7d"
		}
		return single{"list_runs", args, describeRuns("failed", client)}
	}
	if m := reRunID.FindStringSubmatch(s); m != nil && !strings.Contains(s, "cancel") && !strings.Contains(s, "retry") {
		return single{"get_run", map[string]any{"id": m[1]}, describeRun}
	}
	if status := statusIn(s); status != "" && strings.Contains(s, "run") {
		if !effects {
			return single{"list_runs", map[string]any{"status": status, "limit": 20}, describeRuns(status, client)}
		}
		params := map[string]any{"view": "fleet", "status": status}
		return effect{call("navigate", map[string]any{"space": "mission", "params": params}), "show the " + status + " runs in the fleet"}
	}
	if reList.MatchString(s) {
		switch {
		case strings.Contains(s, "playbook"):
			return single{"list_playbooks", map[string]any{}, describePlaybooks}
		case strings.Contains(s, "workflow"):
			return single{"list_workflows", map[string]any{}, describeWorkflows}
		case strings.Contains(s, "schedule"):
			return single{"list_schedules", map[string]any{}, describeSchedules}
		case strings.Contains(s, "audit") || strings.Contains(s, "changed"):
			return single{"list_audit_events", map[string]any{"limit": 10}, describeAudit}
		case strings.Contains(s, "run"):
			return single{"list_runs", map[string]any{"limit": 10}, describeRuns("", client)}
		}
	}
	if m := rePlaybook.FindStringSubmatch(s); m != nil && reOpen.MatchString(s) {
		return single{"get_playbook", map[string]any{"playbook": m[1]}, describePlaybook}
	}
	if reOpen.MatchString(s) || len(strings.Fields(s)) <= 3 {
		for _, w := range spaceWords {
			if w.re.MatchString(s) && !effects {
				return w.data(client)
			}
			if w.re.MatchString(s) {
				args := map[string]any{"space": w.space}
				if w.param != nil {
					args["params"] = w.param
				}
				return effect{call("navigate", args), "open " + w.label}
			}
		}
	}
	return nil
}

const notUnderstoodHelp = "I am the offline operator. I can: show runs by status (\"show failed runs\"), open a space " +
	"(\"open schedules\"), count runs (\"how many runs failed in the last day?\"), report system health, list playbooks, " +
	"workflows, schedules and recent audit events, switch the theme (\"dark mode\"), draft a schedule " +
	"(\"draft a schedule for audit every weekday at 9\"), and propose changes — launch a playbook, cancel or retry a run, " +
	"pause or resume a schedule, create or delete a playbook, delete a schedule, vacuum the database — for you to confirm."

// statusWords are the status words, longest first, as word patterns.
var statusWords = func() []struct {
	re     *regexp.Regexp
	status string
} {
	keys := make([]string, 0, len(runStatuses))
	for k := range runStatuses {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return len(keys[i]) > len(keys[j]) || len(keys[i]) == len(keys[j]) && keys[i] < keys[j]
	})
	out := make([]struct {
		re     *regexp.Regexp
		status string
	}, len(keys))
	for i, k := range keys {
		out[i].re, out[i].status = regexp.MustCompile(`\b`+k+`\b`), runStatuses[k]
	}
	return out
}()

func statusIn(s string) string {
	for _, w := range statusWords {
		if w.re.MatchString(s) {
			return w.status
		}
	}
	return ""
}

// answer is an intent answered in words alone.
type answer struct{ text string }

func (a answer) next([]result) Step { return Step{Text: a.text} }

// single calls one tool, then describes its result.
type single struct {
	tool     string
	args     map[string]any
	describe func(map[string]any) string
}

func (in single) next(results []result) Step {
	if len(results) == 0 {
		return Step{Calls: []model.ToolCall{call(in.tool, in.args)}}
	}
	if r, bad := anyFailed(results); bad {
		return failed(r)
	}
	return Step{Text: in.describe(results[0].value)}
}

// effect asks the cockpit to change, then says it was requested.
type effect struct {
	c    model.ToolCall
	what string
}

func (in effect) next(results []result) Step {
	if len(results) == 0 {
		return Step{Calls: []model.ToolCall{in.c}}
	}
	if r, bad := anyFailed(results); bad {
		return failed(r)
	}
	// The text stays true whatever the browser answers: the dock shows the
	// request's outcome (applied or rejected) beside it.
	return Step{Text: fmt.Sprintf("I asked the cockpit to %s; the request above shows whether your browser applied it.", in.what)}
}
