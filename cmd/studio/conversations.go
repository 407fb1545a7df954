package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// The conversation commands of studio operator: create, list, show,
// archive, rename, delete, fork, restore, pin, the model choice, search,
// and the model list, with the -o table|json convention of every command.

func forkCmd(cfg *config) *cobra.Command {
	var upTo int64
	var title string
	var o *output
	c := &cobra.Command{
		Use:               "fork CONVERSATION_ID",
		ValidArgsFunction: completeArgs(cfg, conversationIDs("")),
		Short:             "Fork a conversation: a new one whose history is the source's up to a turn's done frame",
		Long: "Fork a conversation. The new conversation's history is a copy of the source's frames up to --up-to " +
			"(the sequence of a done frame; default: after the newest complete turn), re-sequenced from 1. " +
			"Proposals and effects in the copy are history: nothing in the fork can be confirmed or applied again.",
		Example: `  studio operator fork 3f2a... --up-to 7 --title "what if"
  studio operator fork 3f2a... -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			var req protocol.ForkRequest
			if cmd.Flags().Changed("up-to") {
				req.UpToSequence = &upTo
			}
			if title != "" {
				req.Title = &title
			}
			id, err := resolveConversation(cmd.Context(), cl, args[0], false)
			if err != nil {
				return err
			}
			page, err := cl.ForkConversation(cmd.Context(), id, req)
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), page, func(w io.Writer) {
				c, f := page.Conversation, page.Conversation.ForkedFrom
				fmt.Fprintf(w, "forked %s up to #%d into %s (%d frames copied)\n", f.ConversationID, f.Sequence, c.ID, f.CopiedThrough)
			})
		},
	}
	o = addOutput(c)
	c.Flags().Int64Var(&upTo, "up-to", 0, "the sequence of the done frame the copy ends with (0: an empty fork)")
	c.Flags().StringVar(&title, "title", "", "the fork's title (default: the source's)")
	return c
}

func convRestoreCmd(cfg *config) *cobra.Command {
	return convActionCmd(cfg, "restore ID", "Restore a conversation deleted within the recovery window (audited)", 1, true,
		func(ctx context.Context, cl *apiclient.Client, id string, _ []string) (protocol.Conversation, error) {
			return cl.RestoreConversation(ctx, id)
		},
		func(w io.Writer, conv protocol.Conversation) { fmt.Fprintln(w, "restored", conv.ID, "as", conv.Status) })
}

func convPinCmd(cfg *config, pin bool) *cobra.Command {
	use, short := "pin ID", "Pin a conversation: pinned ones list first"
	if !pin {
		use, short = "unpin ID", "Unpin a conversation"
	}
	return convUpdateCmd(cfg, use, short, 1, func([]string) protocol.UpdateConversationRequest {
		return protocol.UpdateConversationRequest{Pinned: &pin}
	})
}

func convModelCmd(cfg *config) *cobra.Command {
	c := convUpdateCmd(cfg, "model ID NAME", "Choose the model a conversation's next turns use (\"\" for the daemon's default)", 2,
		func(args []string) protocol.UpdateConversationRequest {
			return protocol.UpdateConversationRequest{Model: &args[1]}
		})
	c.ValidArgsFunction = completeArgs(cfg, conversationIDs(""), modelNames)
	return c
}

func convSearchCmd(cfg *config) *cobra.Command {
	var status string
	var o *output
	c := &cobra.Command{
		Use: "search WORDS", Short: "Conversations whose title or turn text has every word (prefixes match)", Args: cobra.ExactArgs(1),
		Example: `  studio operator conversations search "nightly audit"
  studio operator conversations search release --status deleted -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			list, err := cl.SearchConversations(cmd.Context(), args[0], status)
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), list, func(w io.Writer) { conversationTable(w, list.Conversations) })
		},
	}
	o = addOutput(c)
	c.Flags().StringVar(&status, "status", "", "active, archived or deleted (default active and archived)")
	enumFlag(c, "status", false, conversationStatusValues)
	return c
}

// conversationTable is the table form of a list of conversations.
func conversationTable(w io.Writer, cs []protocol.Conversation) {
	t := newTable(w, "ID", "STATUS", "PINNED", "MODEL", "LAST SEQ", "ACTIVE TURN", "UPDATED", "TITLE")
	for _, c := range cs {
		pinned := "-"
		if c.Pinned {
			pinned = "pinned"
		}
		t.row(c.ID, c.Status, pinned, orDash(c.Model), fmt.Sprint(c.LastSequence), orDash(c.ActiveRequestID), ago(c.UpdatedAt), orDash(c.Title))
	}
	t.flush()
}

func modelsCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "models", Short: "The configured models: name, provider, reachable, context limits", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			list, err := cl.Models(cmd.Context())
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), list, func(w io.Writer) {
				t := newTable(w, "NAME", "PROVIDER", "MODEL", "DEFAULT", "REACHABLE", "CONTEXT TOKENS")
				for _, m := range list.Models {
					def, state, tokens := "-", "yes", "-"
					if m.Default {
						def = "default"
					}
					if !m.Reachable {
						state = "unreachable: " + m.Problem
					}
					if m.ContextLimits.ContextTokens > 0 {
						tokens = strconv.Itoa(m.ContextLimits.ContextTokens)
					}
					t.row(m.Name, m.Provider, orDash(&m.Model), def, state, tokens)
				}
				t.flush()
			})
		},
	}
	o = addOutput(c)
	return c
}

func convCreateCmd(cfg *config) *cobra.Command {
	var title, project string
	var o *output
	c := &cobra.Command{
		Use: "create", Short: "Create a conversation", Args: cobra.NoArgs,
		Example: `  studio operator conversations create --title "nightly triage"
  id=$(studio operator conversations create -o json | jq -r .id)`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			var req protocol.CreateConversationRequest
			if title != "" {
				req.Title = &title
			}
			if project != "" {
				req.Project = &project
			}
			conv, err := cl.CreateConversation(cmd.Context(), req)
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), conv, func(w io.Writer) { conversationFields(w, conv) })
		},
	}
	o = addOutput(c)
	c.Flags().StringVar(&title, "title", "", "title")
	c.Flags().StringVar(&project, "project", "", "project")
	return c
}

func convListCmd(cfg *config) *cobra.Command {
	var status string
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List conversations, pinned first, then newest first", Args: cobra.NoArgs,
		Example: `  studio operator conversations list
  studio operator conversations list --status archived -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			if err := oneOf("status", status, false, conversationStatusValues...); err != nil {
				return err
			}
			all := protocol.ConversationList{Conversations: []protocol.Conversation{}}
			cursor := ""
			for {
				page, err := cl.ListConversations(cmd.Context(), status, cursor, 100)
				if err != nil {
					return err
				}
				all.Conversations = append(all.Conversations, page.Conversations...)
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
			return o.emit(cmd.OutOrStdout(), all, func(w io.Writer) { conversationTable(w, all.Conversations) })
		},
	}
	o = addOutput(c)
	c.Flags().StringVar(&status, "status", "", "active, archived, or deleted (those still recoverable); default active and archived")
	enumFlag(c, "status", false, conversationStatusValues)
	return c
}

// conversationFields is the table form of one conversation.
func conversationFields(w io.Writer, c protocol.Conversation) {
	fields(w, "id", c.ID, "title", orDash(c.Title), "project", orDash(c.Project), "status", c.Status,
		"last sequence", fmt.Sprint(c.LastSequence), "active turn", orDash(c.ActiveRequestID), "created", when(c.CreatedAt))
}

// when formats a wire timestamp (Unix seconds) for people, in UTC.
func when(ts float64) string {
	if ts == 0 {
		return "-"
	}
	return protocol.Time(ts).Format(time.RFC3339)
}

// ago formats a wire timestamp as the time since then.
func ago(ts float64) string {
	if ts == 0 {
		return "-"
	}
	return time.Since(protocol.Time(ts)).Truncate(time.Second).String() + " ago"
}

func convShowCmd(cfg *config) *cobra.Command {
	var after int64
	var o *output
	c := &cobra.Command{
		Use: "show ID", Short: "Show a conversation and its frames", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, conversationIDs("")),
		Example: `  studio operator conversations show 3f2a...    # the transcript
  studio operator conversations show 3f2a... -o json --after 10`,
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := o.isJSON()
			if err != nil {
				return err
			}
			cl, id, err := conversationClient(cmd.Context(), cfg, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			doc := struct {
				Conversation protocol.Conversation `json:"conversation"`
				Frames       []protocol.RawFrame   `json:"frames"`
			}{Frames: []protocol.RawFrame{}}
			first := true
			fw := newFrameWriter(out, false, true)
			for {
				page, err := cl.GetConversation(cmd.Context(), id, after, 500)
				if err != nil {
					return err
				}
				if first {
					first = false
					doc.Conversation = page.Conversation
					if !asJSON {
						conversationFields(out, page.Conversation)
					}
				}
				for _, rf := range page.Frames {
					if asJSON {
						doc.Frames = append(doc.Frames, rf)
						continue
					}
					b, _ := protocol.Marshal(rf)
					f, err := protocol.DecodeFrame(b)
					if err != nil {
						return err
					}
					fw.write(f)
				}
				if !page.HasMore {
					break
				}
				after = page.NextAfterSequence
			}
			if asJSON {
				return printJSON(out, doc)
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	o = addOutput(c)
	c.Flags().Int64Var(&after, "after", 0, "start after this sequence")
	return c
}

func convArchiveCmd(cfg *config, archive bool) *cobra.Command {
	use, status := "archive ID", "archived"
	if !archive {
		use, status = "unarchive ID", "active"
	}
	return convUpdateCmd(cfg, use, "Set a conversation "+status, 1, func([]string) protocol.UpdateConversationRequest {
		return protocol.UpdateConversationRequest{Status: &status}
	})
}

func convRenameCmd(cfg *config) *cobra.Command {
	return convUpdateCmd(cfg, "rename ID TITLE", "Rename a conversation", 2, func(args []string) protocol.UpdateConversationRequest {
		return protocol.UpdateConversationRequest{Title: &args[1]}
	})
}

// convUpdateCmd PATCHes the conversation named by the first argument.
func convUpdateCmd(cfg *config, use, short string, nargs int, req func(args []string) protocol.UpdateConversationRequest) *cobra.Command {
	return convActionCmd(cfg, use, short, nargs, false,
		func(ctx context.Context, cl *apiclient.Client, id string, args []string) (protocol.Conversation, error) {
			return cl.UpdateConversation(ctx, id, req(args))
		}, conversationFields)
}

func convDeleteCmd(cfg *config) *cobra.Command {
	return convActionCmd(cfg, "delete ID", "Delete a conversation (purged later by maintenance)", 1, false,
		func(ctx context.Context, cl *apiclient.Client, id string, _ []string) (protocol.Conversation, error) {
			return cl.DeleteConversation(ctx, id)
		},
		func(w io.Writer, conv protocol.Conversation) { fmt.Fprintln(w, "deleted", conv.ID) })
}

// convActionCmd is a command that acts on the conversation named by its
// first argument (an id or its prefix; deleted: among the deleted ones
// too) and shows the conversation act answers with, by say or as JSON.
func convActionCmd(cfg *config, use, short string, nargs int, deleted bool,
	act func(ctx context.Context, cl *apiclient.Client, id string, args []string) (protocol.Conversation, error),
	say func(w io.Writer, conv protocol.Conversation)) *cobra.Command {
	var o *output
	statusOf := "" // the conversations completion offers
	if deleted {
		statusOf = "deleted"
	}
	c := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(nargs),
		ValidArgsFunction: completeArgs(cfg, conversationIDs(statusOf)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			id, err := resolveConversation(cmd.Context(), cl, args[0], deleted)
			if err != nil {
				return err
			}
			conv, err := act(cmd.Context(), cl, id, args)
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), conv, func(w io.Writer) { say(w, conv) })
		},
	}
	o = addOutput(c)
	return c
}
