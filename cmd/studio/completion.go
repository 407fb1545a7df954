package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// Shell completion (studio completion bash|zsh|fish|powershell): the
// values a flag accepts, and the ids and names an argument takes, asked of
// the daemon the command would talk to (--server, --token as given). A
// daemon that does not answer completes nothing, quickly.

// The values of the enumerated flags: what the server accepts, checked
// before any request (oneOf) and offered by completion.
var (
	runStatusValues          = []string{"queued", "running", "succeeded", "failed", "cancelled"}
	runTriggerValues         = []string{"manual", "operator", "schedule"}
	conversationStatusValues = []string{"active", "archived", "deleted"}
	proposalStatusValues     = strings.Split(allProposalStatuses, ",")
	boolValues               = []string{"true", "false"}
	outputValues             = []string{formatTable, formatJSON}
)

// completionTimeout bounds a completion's requests: a shell waits for it.
const completionTimeout = 3 * time.Second

// enumFlag offers values for the flag; with list, the flag takes several,
// comma separated, and each is completed after the commas.
func enumFlag(c *cobra.Command, flag string, list bool, values []string) {
	_ = c.RegisterFlagCompletionFunc(flag, func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		done := ""
		if list {
			if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
				done = toComplete[:i+1]
			}
		}
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(done+v, toComplete) && !strings.Contains(","+done, ","+v+",") {
				out = append(out, done+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

// lister lists the candidates of one kind: a value and a description each.
type lister func(ctx context.Context, cl *apiclient.Client, toComplete string) ([]cobra.Completion, error)

// completeWith completes from the daemon: list's candidates that begin
// with what is typed, described.
func completeWith(cfg *config, list lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cl, err := operatorClient(cfg)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		all, err := list(ctx, cl, toComplete)
		if err != nil {
			cobra.CompDebugln(fmt.Sprintf("completion: %v", err), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, c := range all {
			if value, _, _ := strings.Cut(c, "\t"); strings.HasPrefix(value, toComplete) {
				out = append(out, c)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeArgs completes the positional arguments in order: listers[i]
// the i-th (nil: nothing); arguments past them complete nothing.
func completeArgs(cfg *config, listers ...lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= len(listers) || listers[len(args)] == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeWith(cfg, listers[len(args)])(cmd, args, toComplete)
	}
}

// completionLimit is how many ids completion offers when nothing is typed.
const completionLimit = 50

// runIDs are the newest runs (those whose id begins with what is typed).
func runIDs(ctx context.Context, cl *apiclient.Client, typed string) ([]cobra.Completion, error) {
	q := url.Values{"limit": {fmt.Sprint(completionLimit)}}
	if typed != "" {
		q.Set("q", strings.ToLower(typed))
	}
	page, err := cl.ListRuns(ctx, q)
	out := make([]cobra.Completion, 0, len(page.Runs))
	for _, r := range page.Runs {
		out = append(out, cobra.CompletionWithDesc(r.ID, fmt.Sprintf("%s %s, %s", r.PlaybookName, r.Status, ago(r.CreatedAt))))
	}
	return out, err
}

// conversationIDs are the active and archived conversations; deleted:
// those still recoverable.
func conversationIDs(status string) lister {
	return func(ctx context.Context, cl *apiclient.Client, _ string) ([]cobra.Completion, error) {
		page, err := cl.ListConversations(ctx, status, "", 100)
		out := make([]cobra.Completion, 0, len(page.Conversations))
		for _, c := range page.Conversations {
			out = append(out, cobra.CompletionWithDesc(c.ID, orDash(c.Title)))
		}
		return out, err
	}
}

// pendingProposalIDs are the proposals waiting for a decision.
func pendingProposalIDs(ctx context.Context, cl *apiclient.Client, _ string) ([]cobra.Completion, error) {
	ps, err := cl.Proposals(ctx, "pending")
	out := make([]cobra.Completion, 0, len(ps))
	for _, p := range ps {
		out = append(out, cobra.CompletionWithDesc(p.ID, p.Risk+": "+p.Summary))
	}
	return out, err
}

// playbookNames, workflowNames and scheduleNames are the library's names.
var (
	playbookNames = libraryNames((*apiclient.Client).ListPlaybooks,
		func(p studio.PlaybookPage) ([]studio.Playbook, string) { return p.Playbooks, p.NextCursor },
		func(p studio.Playbook) cobra.Completion { return cobra.CompletionWithDesc(p.Name, p.Description) })
	workflowNames = libraryNames((*apiclient.Client).ListWorkflows,
		func(p studio.WorkflowPage) ([]studio.Workflow, string) { return p.Workflows, p.NextCursor },
		func(w studio.Workflow) cobra.Completion { return cobra.CompletionWithDesc(w.Name, w.Description) })
	scheduleNames = libraryNames((*apiclient.Client).ListSchedules,
		func(p studio.SchedulePage) ([]studio.Schedule, string) { return p.Schedules, p.NextCursor },
		func(s studio.Schedule) cobra.Completion {
			return cobra.CompletionWithDesc(s.Name, s.Cron+" (UTC) "+s.PlaybookName)
		})
)

// libraryNames lists every item of a paged list endpoint (its page's
// items and next cursor), each as a completion.
func libraryNames[P, T any](endpoint func(*apiclient.Client, context.Context, url.Values) (P, error),
	items func(P) ([]T, string), completion func(T) cobra.Completion) lister {
	return func(ctx context.Context, cl *apiclient.Client, _ string) ([]cobra.Completion, error) {
		all, err := pages(ctx, 0, func(q url.Values) ([]T, string, error) {
			page, err := endpoint(cl, ctx, q)
			list, next := items(page)
			return list, next, err
		}, url.Values{})
		out := make([]cobra.Completion, 0, len(all))
		for _, it := range all {
			out = append(out, completion(it))
		}
		return out, err
	}
}

// modelNames are the configured models.
func modelNames(ctx context.Context, cl *apiclient.Client, _ string) ([]cobra.Completion, error) {
	list, err := cl.Models(ctx)
	out := make([]cobra.Completion, 0, len(list.Models))
	for _, m := range list.Models {
		out = append(out, cobra.CompletionWithDesc(m.Name, m.Provider))
	}
	return out, err
}

// spaceValues are the cockpit's spaces, for --space.
var spaceValues = protocol.Spaces
