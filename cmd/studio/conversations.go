package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/protocol"
)

// The conversation commands beyond send and show: fork, restore, pin, the model choice, search and
// the model list, with the -o table|json convention of every command.

func forkCmd(cfg *config) *cobra.Command {
	var upTo int64
	var title string
	var o *output
	c := &cobra.Command{
		Use:   "fork CONVERSATION_ID",
		Short: "Fork a conversation: a new one whose history is the source's up to a turn's done frame",
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
	var o *output
	c := &cobra.Command{
		Use: "restore ID", Short: "Restore a conversation deleted within the recovery window (audited)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			id, err := resolveConversation(cmd.Context(), cl, args[0], true)
			if err != nil {
				return err
			}
			conv, err := cl.RestoreConversation(cmd.Context(), id)
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), conv, func(w io.Writer) { fmt.Fprintln(w, "restored", conv.ID, "as", conv.Status) })
		},
	}
	o = addOutput(c)
	return c
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
	return convUpdateCmd(cfg, "model ID NAME", "Choose the model a conversation's next turns use (\"\" for the daemon's default)", 2,
		func(args []string) protocol.UpdateConversationRequest {
			return protocol.UpdateConversationRequest{Model: &args[1]}
		})
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
