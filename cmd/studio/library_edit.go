package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/studio"
)

// The editing commands of the library: playbooks create, edit and delete;
// schedules show, create and delete. Updates carry the version they read
// (expectedVersion): a change made meanwhile is a conflict (exit 4).

// playbookFlags are the fields create and edit set from flags.
type playbookFlags struct {
	name, description, prompt, promptFile, project string
	args, required                                 []string
}

func (f *playbookFlags) register(c *cobra.Command, withName bool) {
	fl := c.Flags()
	if withName {
		fl.StringVar(&f.name, "name", "", "a new name")
	}
	fl.StringVar(&f.description, "description", "", "what the playbook is for")
	fl.StringVar(&f.prompt, "prompt", "", "the instructions ({{input}} and {{ARG}} are replaced)")
	fl.StringVar(&f.promptFile, "prompt-file", "", "read the prompt from this file (\"-\": stdin)")
	fl.StringArrayVar(&f.args, "arg", nil, "declare an optional argument NAME or NAME=DEFAULT (repeatable; replaces the declarations)")
	fl.StringArrayVar(&f.required, "required-arg", nil, "declare a required argument NAME (repeatable; replaces the declarations)")
}

// promptText is the prompt the flags give, if any.
func (f *playbookFlags) promptText(cmd *cobra.Command) (string, bool, error) {
	if f.promptFile != "" {
		if f.prompt != "" {
			return "", false, usageError{fmt.Errorf("give --prompt or --prompt-file, not both")}
		}
		var b []byte
		var err error
		if f.promptFile == "-" {
			b, err = io.ReadAll(cmd.InOrStdin())
		} else {
			b, err = os.ReadFile(f.promptFile)
		}
		if err != nil {
			return "", false, usageError{fmt.Errorf("--prompt-file: %w", err)}
		}
		return string(b), true, nil
	}
	return f.prompt, cmd.Flags().Changed("prompt"), nil
}

// argDecls is the argument declarations the flags give (nil: none given).
func (f *playbookFlags) argDecls() ([]studio.PlaybookArg, error) {
	if f.args == nil && f.required == nil {
		return nil, nil
	}
	decls := []studio.PlaybookArg{}
	for _, a := range f.args {
		name, def, hasDef := strings.Cut(a, "=")
		if name == "" {
			return nil, usageError{fmt.Errorf("--arg %q: NAME or NAME=DEFAULT", a)}
		}
		d := studio.PlaybookArg{Name: name}
		if hasDef {
			d.Default = &def
		}
		decls = append(decls, d)
	}
	for _, name := range f.required {
		if name == "" {
			return nil, usageError{fmt.Errorf("--required-arg needs a NAME")}
		}
		decls = append(decls, studio.PlaybookArg{Name: name, Required: true})
	}
	return decls, nil
}

func playbooksCreateCmd(cfg *config) *cobra.Command {
	var f playbookFlags
	var fromFile string
	var o *output
	c := &cobra.Command{
		Use: "create NAME", Short: "Create a playbook", Args: cobra.MaximumNArgs(1),
		Long: "create makes a playbook from flags, or from the command as JSON (--from-file, \"-\": stdin;\n" +
			"the flags given override its fields).",
		Example: `  studio playbooks create triage --prompt "Triage {{input}} for {{team}}" --required-arg team
  studio playbooks create notes --prompt-file notes.md --arg tone=plain
  studio playbooks create --from-file playbook.json -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var pc studio.CreatePlaybookCommand
			if fromFile != "" {
				if err := readCommandFile(cmd, fromFile, &pc); err != nil {
					return err
				}
			}
			if len(args) == 1 {
				pc.Name = args[0]
			}
			if pc.Name == "" {
				return usageError{fmt.Errorf("create needs a NAME (or a name in --from-file)")}
			}
			prompt, ok, err := f.promptText(cmd)
			if err != nil {
				return err
			}
			if ok {
				pc.Prompt = prompt
			}
			if pc.Prompt == "" {
				return usageError{fmt.Errorf("a playbook needs a --prompt or --prompt-file")}
			}
			if cmd.Flags().Changed("description") {
				pc.Description = f.description
			}
			if f.project != "" {
				pc.Project = f.project
			}
			decls, err := f.argDecls()
			if err != nil {
				return err
			}
			if decls != nil {
				pc.Args = decls
			}
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			p, err := cl.CreatePlaybook(cmd.Context(), pc)
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), p, func(w io.Writer) { playbookFields(w, p) })
		},
	}
	o = addOutput(c)
	f.register(c, false)
	c.Flags().StringVar(&f.project, "project", "", "project (default \"default\")")
	c.Flags().StringVarP(&fromFile, "from-file", "f", "", "the create command as JSON (\"-\": stdin)")
	return c
}

func playbooksEditCmd(cfg *config) *cobra.Command {
	var f playbookFlags
	var expected int64
	var o *output
	c := &cobra.Command{
		Use: "edit NAME_OR_ID", Short: "Change a playbook's name, description, prompt or argument declarations", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, playbookNames),
		Long: "edit sends only the fields given, with the version it read (or --expected-version): if someone\n" +
			"changed the playbook in between, nothing changes and it exits 4.",
		Example: `  studio playbooks edit triage --description "Sort new issues"
  studio playbooks edit triage --prompt-file triage.md --expected-version 3`,
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		uc := studio.UpdatePlaybookCommand{Playbook: args[0], ExpectedVersion: expected}
		if cmd.Flags().Changed("name") {
			uc.Name = &f.name
		}
		if cmd.Flags().Changed("description") {
			uc.Description = &f.description
		}
		prompt, ok, err := f.promptText(cmd)
		if err != nil {
			return err
		}
		if ok {
			uc.Prompt = &prompt
		}
		decls, err := f.argDecls()
		if err != nil {
			return err
		}
		if decls != nil {
			uc.Args = &decls
		}
		if uc.Name == nil && uc.Description == nil && uc.Prompt == nil && uc.Args == nil {
			return usageError{fmt.Errorf("nothing to change: give --name, --description, --prompt, --prompt-file, --arg or --required-arg")}
		}
		cl, err := o.operatorClient(cfg)
		if err != nil {
			return err
		}
		if uc.ExpectedVersion == 0 {
			cur, err := cl.GetPlaybook(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			uc.ExpectedVersion = cur.Version
		}
		p, err := cl.UpdatePlaybook(cmd.Context(), uc)
		if err != nil {
			return err
		}
		return o.emit(cmd.OutOrStdout(), p, func(w io.Writer) { playbookFields(w, p) })
	}
	o = addOutput(c)
	f.register(c, true)
	c.Flags().Int64Var(&expected, "expected-version", 0, "the version you last read (default: the current one)")
	return c
}

func playbooksDeleteCmd(cfg *config) *cobra.Command {
	return deleteCmd(cfg, "playbook", playbookNames, func(ctx context.Context, cl *apiclient.Client, ref string, v int64) (studio.Result, error) {
		return cl.DeletePlaybook(ctx, ref, v)
	})
}

// playbookFields is the table form of one playbook.
func playbookFields(w io.Writer, p studio.Playbook) {
	fields(w, "id", p.ID, "name", p.Name, "version", fmt.Sprint(p.Version), "project", p.Project,
		"description", p.Description, "updated", when(p.UpdatedAt))
	if len(p.Args) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, "ARG", "REQUIRED", "DEFAULT", "DESCRIPTION")
		for _, a := range p.Args {
			t.row(a.Name, fmt.Sprint(a.Required), orDash(a.Default), a.Description)
		}
		t.flush()
	}
	fmt.Fprintf(w, "\n%s\n", strings.TrimRight(p.Prompt, "\n"))
}

func schedulesShowCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "show NAME_OR_ID", Short: "Show a schedule", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, scheduleNames),
		Example:           `  studio schedules show nightly-audit`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			s, err := cl.GetSchedule(ctx, args[0])
			if err != nil {
				return err
			}
			return o.emit(out, s, func(w io.Writer) { scheduleFields(w, s) })
		}),
	}
	o = addOutput(c)
	return c
}

// scheduleFields is the table form of one schedule.
func scheduleFields(w io.Writer, s studio.Schedule) {
	next, last := "-", "-"
	if s.NextRunAt != nil && s.Enabled {
		next = when(*s.NextRunAt)
	}
	if s.LastRunAt != nil {
		last = when(*s.LastRunAt) + " (run " + orDash(s.LastRunID) + ")"
	}
	fields(w, "id", s.ID, "name", s.Name, "version", fmt.Sprint(s.Version), "enabled", fmt.Sprint(s.Enabled),
		"cron (UTC)", s.Cron, "playbook", s.PlaybookName, "input", s.Input, "args", argsString(s.Args),
		"next run", next, "last run", last, "skipped runs", fmt.Sprint(s.SkippedRuns), "project", s.Project)
}

func schedulesCreateCmd(cfg *config) *cobra.Command {
	var cron, playbook, input, project string
	var argPairs []string
	var paused bool
	var o *output
	c := &cobra.Command{
		Use: "create NAME", Short: "Create a schedule: a playbook launched on a 5-field cron (UTC)", Args: cobra.ExactArgs(1),
		Example: `  studio schedules create nightly-audit --cron "0 2 * * *" --playbook audit-repo --arg repo=acme/api
  studio schedules create weekly --cron "0 9 * * 1" --playbook summarize-failures --paused -o json`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			sc := studio.CreateScheduleCommand{Name: args[0], Cron: cron, Playbook: playbook, Input: input, Project: project}
			var err error
			if sc.Args, err = argValues(argPairs); err != nil {
				return err
			}
			if paused {
				off := false
				sc.Enabled = &off
			}
			s, err := cl.CreateSchedule(ctx, sc)
			if err != nil {
				return err
			}
			return o.emit(out, s, func(w io.Writer) { scheduleFields(w, s) })
		}),
	}
	o = addOutput(c)
	f := c.Flags()
	f.StringVar(&cron, "cron", "", "5-field cron expression in UTC (for example \"0 2 * * *\")")
	f.StringVar(&playbook, "playbook", "", "the playbook to launch: name or id")
	f.StringVar(&input, "input", "", "the input of every launched run")
	f.StringArrayVar(&argPairs, "arg", nil, "an argument NAME=VALUE of every launched run (repeatable)")
	f.BoolVar(&paused, "paused", false, "create it paused")
	f.StringVar(&project, "project", "", "project (default: the playbook's)")
	_ = c.MarkFlagRequired("cron")
	_ = c.MarkFlagRequired("playbook")
	_ = c.RegisterFlagCompletionFunc("playbook", completeWith(cfg, playbookNames))
	return c
}

func schedulesEditCmd(cfg *config) *cobra.Command {
	var name, cron, playbook, input string
	var argPairs []string
	var clearArgs bool
	var expected int64
	var o *output
	c := &cobra.Command{
		Use: "edit NAME_OR_ID", Short: "Change a schedule's cron, playbook, input, arguments or name", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, scheduleNames),
		Long: "edit sends only the fields given, with the version it read (or --expected-version): if someone\n" +
			"changed the schedule in between, nothing changes and it exits 4. A new cron moves the next run\n" +
			"of an enabled schedule to the cron's next slot; --arg replaces all the arguments.",
		Example: `  studio schedules edit nightly-audit --cron "0 4 * * *"
  studio schedules edit nightly-audit --playbook audit-repo --arg repo=acme/web
  studio schedules edit nightly-audit --name nightly-web-audit --expected-version 3 -o json`,
	}
	c.RunE = appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
		uc := studio.UpdateScheduleCommand{Schedule: args[0], ExpectedVersion: expected}
		set := func(flag string, value *string, field **string) {
			if c.Flags().Changed(flag) {
				*field = value
			}
		}
		set("name", &name, &uc.Name)
		set("cron", &cron, &uc.Cron)
		set("playbook", &playbook, &uc.Playbook)
		set("input", &input, &uc.Input)
		if clearArgs && len(argPairs) > 0 {
			return usageError{fmt.Errorf("give --arg or --clear-args, not both")}
		}
		if clearArgs || len(argPairs) > 0 {
			given, err := argValues(argPairs)
			if err != nil {
				return err
			}
			if given == nil {
				given = map[string]string{}
			}
			uc.Args = &given
		}
		if uc.Name == nil && uc.Cron == nil && uc.Playbook == nil && uc.Input == nil && uc.Args == nil {
			return usageError{fmt.Errorf("nothing to change: give --cron, --playbook, --input, --arg, --clear-args or --name")}
		}
		if uc.ExpectedVersion == 0 {
			cur, err := cl.GetSchedule(ctx, args[0])
			if err != nil {
				return err
			}
			uc.ExpectedVersion = cur.Version
		}
		s, err := cl.UpdateSchedule(ctx, uc)
		if err != nil {
			return err
		}
		return o.emit(out, s, func(w io.Writer) { scheduleFields(w, s) })
	})
	o = addOutput(c)
	f := c.Flags()
	f.StringVar(&cron, "cron", "", "a new 5-field cron expression in UTC (for example \"0 4 * * *\")")
	f.StringVar(&playbook, "playbook", "", "a new playbook to launch: name or id")
	f.StringVar(&input, "input", "", "a new input of every launched run")
	f.StringArrayVar(&argPairs, "arg", nil, "an argument NAME=VALUE of every launched run (repeatable; replaces the arguments)")
	f.BoolVar(&clearArgs, "clear-args", false, "launch with no arguments (the playbook's defaults)")
	f.StringVar(&name, "name", "", "a new name")
	f.Int64Var(&expected, "expected-version", 0, "the version you last read (default: the current one)")
	_ = c.RegisterFlagCompletionFunc("playbook", completeWith(cfg, playbookNames))
	return c
}

// argValues reads --arg NAME=VALUE pairs (nil when none are given).
func argValues(pairs []string) (map[string]string, error) {
	var out map[string]string
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--arg %q is not NAME=VALUE", kv)}
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out, nil
}

func schedulesDeleteCmd(cfg *config) *cobra.Command {
	return deleteCmd(cfg, "schedule", scheduleNames, func(ctx context.Context, cl *apiclient.Client, ref string, v int64) (studio.Result, error) {
		return cl.DeleteSchedule(ctx, ref, v)
	})
}
