package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/studio"
)

// The workflows commands: ordered playbook steps over /api/app/workflows.

func newWorkflowsCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "List, show, launch, create and delete workflows (ordered playbook steps)",
		Example: `  studio workflows list
  studio workflows create release --step audit-repo --step '{"playbook":"write-release-notes","args":{"version":"1.4.0"}}'
  studio workflows launch release -o json`,
	}
	cmd.AddCommand(workflowsListCmd(cfg), workflowsShowCmd(cfg), workflowsLaunchCmd(cfg), workflowsCreateCmd(cfg), workflowsDeleteCmd(cfg))
	return cmd
}

func workflowsListCmd(cfg *config) *cobra.Command {
	var query string
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List workflows by name", Args: cobra.NoArgs,
		Example: `  studio workflows list
  studio workflows list --query release -o json`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			q := url.Values{}
			if query != "" {
				q.Set("q", query)
			}
			wfs, err := pages(ctx, 0, func(q url.Values) ([]studio.Workflow, string, error) {
				p, err := cl.ListWorkflows(ctx, q)
				return p.Workflows, p.NextCursor, err
			}, q)
			if err != nil {
				return err
			}
			return o.emit(out, studio.WorkflowPage{Workflows: wfs}, func(w io.Writer) {
				t := newTable(w, "NAME", "VERSION", "STEPS", "UPDATED", "DESCRIPTION")
				for _, wf := range wfs {
					names := make([]string, 0, len(wf.Steps))
					for _, s := range wf.Steps {
						names = append(names, s.PlaybookName)
					}
					t.row(wf.Name, strconv.FormatInt(wf.Version, 10), strings.Join(names, " → "), ago(wf.UpdatedAt), truncate(wf.Description, 60))
				}
				t.flush()
			})
		}),
	}
	o = addOutput(c)
	c.Flags().StringVarP(&query, "query", "q", "", "only workflows whose name or description contains this")
	return c
}

// workflowFields is the table form of one workflow.
func workflowFields(w io.Writer, wf studio.Workflow) {
	fields(w, "id", wf.ID, "name", wf.Name, "version", strconv.FormatInt(wf.Version, 10), "project", wf.Project,
		"description", wf.Description, "updated", when(wf.UpdatedAt))
	fmt.Fprintln(w)
	t := newTable(w, "STEP", "PLAYBOOK", "INPUT", "ARGS")
	for i, s := range wf.Steps {
		t.row(strconv.Itoa(i+1), s.PlaybookName, truncate(s.Input, 60), argsString(s.Args))
	}
	t.flush()
}

// argsString is k=v pairs in name order.
func argsString(args map[string]string) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+args[k])
	}
	return strings.Join(parts, " ")
}

func workflowsShowCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "show NAME_OR_ID", Short: "Show a workflow and its steps", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, workflowNames),
		Example:           `  studio workflows show release`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			wf, err := cl.GetWorkflow(ctx, args[0])
			if err != nil {
				return err
			}
			return o.emit(out, wf, func(w io.Writer) { workflowFields(w, wf) })
		}),
	}
	o = addOutput(c)
	return c
}

func workflowsLaunchCmd(cfg *config) *cobra.Command {
	var expected int64
	var o *output
	c := &cobra.Command{
		Use: "launch NAME_OR_ID", Short: "Launch a workflow: one queued run per step, in step order", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, workflowNames),
		Example: `  studio workflows launch release
  studio workflows launch release --expected-version 3 -o json | jq -r '.runs[].id'`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			l, err := cl.LaunchWorkflow(ctx, args[0], expected)
			if err != nil {
				return err
			}
			return o.emit(out, l, func(w io.Writer) {
				if l.Workflow != nil {
					fmt.Fprintf(w, "launched %s (version %d): %d runs\n", l.Workflow.Name, l.Workflow.Version, len(l.Runs))
				}
				t := newTable(w, "ID", "STATUS", "PLAYBOOK", "CREATED")
				for _, r := range l.Runs {
					t.row(r.ID, r.Status, r.PlaybookName, when(r.CreatedAt))
				}
				t.flush()
			})
		}),
	}
	o = addOutput(c)
	c.Flags().Int64Var(&expected, "expected-version", 0, "refuse (exit 4) unless the workflow is still at this version")
	return c
}

// parseStep reads a --step: a playbook name or id, or a JSON step object
// {"playbook", "input", "args"}.
func parseStep(v string) (studio.WorkflowStepInput, error) {
	var s studio.WorkflowStepInput
	if strings.HasPrefix(strings.TrimSpace(v), "{") {
		if err := protocol.Unmarshal([]byte(v), &s); err != nil {
			return s, usageError{fmt.Errorf("--step %s: not a step object {\"playbook\", \"input\", \"args\"}: %v", v, err)}
		}
		return s, nil
	}
	if v == "" {
		return s, usageError{fmt.Errorf("--step needs a playbook name or a JSON step")}
	}
	return studio.WorkflowStepInput{Playbook: v}, nil
}

// readCommandFile decodes a JSON command from a file ("-": stdin) into v.
func readCommandFile(cmd *cobra.Command, path string, v any) error {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(cmd.InOrStdin())
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return usageError{fmt.Errorf("--from-file: %w", err)}
	}
	if err := protocol.Unmarshal(b, v); err != nil {
		return usageError{fmt.Errorf("--from-file %s: not the command's JSON: %w", path, err)}
	}
	return nil
}

func workflowsCreateCmd(cfg *config) *cobra.Command {
	var description, project, fromFile string
	var steps []string
	var o *output
	c := &cobra.Command{
		Use: "create NAME", Short: "Create a workflow from ordered steps", Args: cobra.MaximumNArgs(1),
		Long: "create makes a workflow. Each --step (repeatable, in order) is a playbook name or id, or a JSON object\n" +
			`{"playbook": ..., "input": ..., "args": {...}}; --from-file reads the whole command as JSON ("-": stdin),` + "\n" +
			"and the flags given override its fields.",
		Example: `  studio workflows create nightly --step audit-repo --step summarize-failures
  studio workflows create release --step '{"playbook":"write-release-notes","args":{"version":"1.4.0"}}'
  studio workflows create --from-file release.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var wc studio.CreateWorkflowCommand
			if fromFile != "" {
				if err := readCommandFile(cmd, fromFile, &wc); err != nil {
					return err
				}
			}
			if len(args) == 1 {
				wc.Name = args[0]
			}
			if wc.Name == "" {
				return usageError{fmt.Errorf("create needs a NAME (or a name in --from-file)")}
			}
			if cmd.Flags().Changed("description") {
				wc.Description = description
			}
			if project != "" {
				wc.Project = project
			}
			if len(steps) > 0 {
				wc.Steps = nil
				for _, v := range steps {
					s, err := parseStep(v)
					if err != nil {
						return err
					}
					wc.Steps = append(wc.Steps, s)
				}
			}
			if len(wc.Steps) == 0 {
				return usageError{fmt.Errorf("a workflow needs at least one --step")}
			}
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			wf, err := cl.CreateWorkflow(cmd.Context(), wc)
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), wf, func(w io.Writer) { workflowFields(w, wf) })
		},
	}
	o = addOutput(c)
	f := c.Flags()
	f.StringArrayVar(&steps, "step", nil, "a step, in order: a playbook name or id, or a JSON step object (repeatable)")
	f.StringVar(&description, "description", "", "what the workflow is for")
	f.StringVar(&project, "project", "", "project (default \"default\")")
	f.StringVarP(&fromFile, "from-file", "f", "", "the create command as JSON (\"-\": stdin)")
	_ = c.RegisterFlagCompletionFunc("step", completeWith(cfg, playbookNames))
	return c
}

// deleteCmd is the delete of a playbook, workflow or schedule by name or
// id; names lists them for completion.
func deleteCmd(cfg *config, kind string, names lister, del func(ctx context.Context, cl *apiclient.Client, ref string, expected int64) (studio.Result, error)) *cobra.Command {
	var expected int64
	var o *output
	c := &cobra.Command{
		Use: "delete NAME_OR_ID", Short: "Delete a " + kind + " (audited)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, names),
		Example:           fmt.Sprintf("  studio %ss delete NAME\n  studio %ss delete NAME --expected-version 3", kind, kind),
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			res, err := del(ctx, cl, args[0], expected)
			if err != nil {
				return err
			}
			return o.emit(out, res, func(w io.Writer) { fmt.Fprintln(w, res.Summary) })
		}),
	}
	o = addOutput(c)
	c.Flags().Int64Var(&expected, "expected-version", 0, "refuse (exit 4) unless the "+kind+" is still at this version")
	return c
}

func workflowsDeleteCmd(cfg *config) *cobra.Command {
	c := deleteCmd(cfg, "workflow", workflowNames, func(ctx context.Context, cl *apiclient.Client, ref string, v int64) (studio.Result, error) {
		return cl.DeleteWorkflow(ctx, ref, v)
	})
	c.Short = "Delete a workflow (the runs it launched stay; audited)"
	return c
}
