package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// Exit codes: what a script can tell apart without reading the message.
const (
	exitOK          = 0
	exitFailure     = 1 // anything else: a failing check, a refused or failed command
	exitUsage       = 2 // a wrong flag, argument or command; an ambiguous id prefix
	exitNotFound    = 3 // the conversation, proposal, run, playbook or schedule does not exist
	exitConflict    = 4 // conflict or stale_context: refresh and try again
	exitUnreachable = 5 // no daemon answered at the address
	exitPending     = 6 // sent for approval: the command waits for another approver
	exitInterrupted = 130
)

// exitCodesHelp is the exit code section of `studio --help`.
const exitCodesHelp = `Exit codes:
  0  success
  1  error (a failing check, a refused or failed command)
  2  usage: a wrong command, flag or argument, or an id prefix several ids share
  3  not found: the conversation, proposal, run, playbook or schedule does not exist
  4  conflict or stale: the resource changed or is busy; refresh and try again
  5  the daemon cannot be reached: is ` + "`studio serve`" + ` running?
  6  sent for approval: the command needs a second approver and waits for one (studio approvals)`

// usageError is a mistake in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitError carries an explicit exit code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// exitCode maps an error to the process's exit code.
func exitCode(err error) int {
	var ee exitError
	var ue usageError
	var unreachable *apiclient.UnreachableError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), isCobraUsage(err):
		return exitUsage
	case errors.As(err, &unreachable):
		return exitUnreachable
	}
	switch protocol.CodeOf(err) {
	case protocol.NotFound:
		return exitNotFound
	case protocol.Conflict, protocol.StaleContext:
		return exitConflict
	}
	return exitFailure
}

// isCobraUsage recognises the errors cobra returns for an unknown command
// or a missing required flag (it has no types for them).
func isCobraUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "unknown command") || strings.HasPrefix(s, "required flag") ||
		strings.HasPrefix(s, "unknown flag") || strings.HasPrefix(s, "unknown shorthand flag")
}

// unknownCommandError is a group command (runs, operator, ...) given a
// subcommand it does not have: the error says the near names (did you
// mean), else the names it has.
type unknownCommandError struct {
	name, path string
	suggest    []string // subcommands whose names are near name
	commands   []string // every subcommand, when none is near
}

func (e unknownCommandError) Error() string {
	msg := fmt.Sprintf("unknown command %q for %q", e.name, e.path)
	if len(e.suggest) > 0 {
		return msg + ": did you mean " + orList(e.suggest) + "?"
	}
	return msg + " (its commands: " + strings.Join(e.commands, ", ") + ")"
}

// unknownCommand is the error of c given the subcommand name it lacks.
func unknownCommand(c *cobra.Command, name string) error {
	e := unknownCommandError{name: name, path: c.CommandPath()}
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if e.suggest = nearest(name, names); len(e.suggest) == 0 {
		e.commands = names
	}
	return usageError{e}
}

// markUsage makes every argument check and flag parse error of the tree a
// usageError (exit code 2), with the flags near a mistyped one (did you
// mean), and a group command without a subcommand it knows a usage error
// too (cobra would print the help and succeed).
func markUsage(cmd *cobra.Command) {
	group := cmd.HasSubCommands() && cmd.Run == nil && cmd.RunE == nil
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// runs lst --status failed: the command is what is wrong, not the flag.
		if group && c.Flags().NArg() > 0 {
			return unknownCommand(c, c.Flags().Arg(0))
		}
		return usageError{flagError(c, err)}
	})
	if group {
		cmd.Args = cobra.ArbitraryArgs // the unknown name is RunE's to say
		cmd.RunE = func(c *cobra.Command, a []string) error {
			if len(a) > 0 {
				return unknownCommand(c, a[0])
			}
			return c.Help()
		}
	}
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		markUsage(c)
	}
}

// oneOf checks a flag's value against the values the server accepts: a
// wrong one is a usage error (exit 2), said before any request. An empty
// value (the flag not given) passes; with list, the value may be several,
// comma separated.
func oneOf(flag, value string, list bool, allowed ...string) error {
	if value == "" {
		return nil
	}
	parts := []string{value}
	if list {
		parts = strings.Split(value, ",")
	}
	for _, p := range parts {
		if !slices.Contains(allowed, p) {
			msg := fmt.Sprintf("--%s %q: use %s", flag, p, strings.Join(allowed, ", "))
			if near := nearest(p, allowed); len(near) > 0 {
				msg += " (did you mean " + orList(near) + "?)"
			}
			return usageError{errors.New(msg)}
		}
	}
	return nil
}

// Output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
)

// output is the -o/--output flag with --json as its alias.
type output struct {
	format string
	json   bool
}

// addOutput registers -o table|json and --json on a command.
func addOutput(cmd *cobra.Command) *output {
	o := &output{}
	cmd.Flags().StringVarP(&o.format, "output", "o", formatTable, "output format: table or json")
	cmd.Flags().BoolVar(&o.json, "json", false, "same as -o json")
	enumFlag(cmd, "output", false, outputValues)
	return o
}

// isJSON resolves the flags; an unknown format is a usage error.
func (o *output) isJSON() (bool, error) {
	switch {
	case o.json:
		return true, nil
	case o.format == formatJSON:
		return true, nil
	case o.format == formatTable || o.format == "":
		return false, nil
	}
	return false, usageError{fmt.Errorf("unknown output format %q: use table or json", o.format)}
}

// emit prints v as indented JSON when -o json, else calls table.
func (o *output) emit(w io.Writer, v any, table func(w io.Writer)) error {
	asJSON, err := o.isJSON()
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(w, v)
	}
	table(w)
	return nil
}

// table writes headed, aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() { _ = t.tw.Flush() }

// fields writes "name: value" lines, aligned: the table form of one object.
func fields(w io.Writer, kv ...string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[i], strings.ReplaceAll(kv[i+1], "\n", " "))
	}
	_ = tw.Flush()
}

func orDash(p *string) string {
	if p == nil || *p == "" {
		return "-"
	}
	return *p
}
