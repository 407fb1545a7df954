package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/protocol"
)

// The CLI of issue 15: fork, restore, pin, the model choice, search and
// the model list.

func forkCmd(cfg *config) *cobra.Command {
	var upTo int64
	var title string
	var jsonOut bool
	c := &cobra.Command{
		Use:   "fork CONVERSATION_ID",
		Short: "Fork a conversation: a new one whose history is the source's up to a turn's done frame",
		Long: "Fork a conversation. The new conversation's history is a copy of the source's frames up to --up-to " +
			"(the sequence of a done frame; default: after the newest complete turn), re-sequenced from 1. " +
			"Proposals and effects in the copy are history: nothing in the fork can be confirmed or applied again.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
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
			page, err := cl.ForkConversation(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), page)
			}
			c := page.Conversation
			f := c.ForkedFrom
			fmt.Fprintf(cmd.OutOrStdout(), "forked %s up to #%d into %s (%d frames copied)\n", f.ConversationID, f.Sequence, c.ID, f.CopiedThrough)
			return nil
		},
	}
	c.Flags().Int64Var(&upTo, "up-to", 0, "the sequence of the done frame the copy ends with (0: an empty fork)")
	c.Flags().StringVar(&title, "title", "", "the fork's title (default: the source's)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the fork and its first page of frames as JSON")
	return c
}

func convRestoreCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use: "restore ID", Short: "Restore a conversation deleted within the recovery window (audited)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			c, err := cl.RestoreConversation(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "restored", c.ID, "as", c.Status)
			return nil
		},
	}
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
	c := &cobra.Command{
		Use: "search WORDS", Short: "Conversations whose title or turn text has every word (prefixes match)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			list, err := cl.SearchConversations(cmd.Context(), args[0], status)
			if err != nil {
				return err
			}
			for _, c := range list.Conversations {
				printConversationLine(cmd.OutOrStdout(), c)
			}
			return nil
		},
	}
	c.Flags().StringVar(&status, "status", "", "active, archived or deleted (default active and archived)")
	return c
}

// printConversationLine is one conversation for a human.
func printConversationLine(w io.Writer, c protocol.Conversation) {
	title := "(untitled)"
	if c.Title != nil {
		title = *c.Title
	}
	extra := ""
	if c.Pinned {
		extra += " [pinned]"
	}
	if c.Model != nil {
		extra += " model " + *c.Model
	}
	if c.ActiveRequestID != nil {
		extra += " turn " + *c.ActiveRequestID + " active"
	}
	fmt.Fprintf(w, "%s  %-8s  seq %-5d  %s%s\n", c.ID, c.Status, c.LastSequence, title, extra)
}

func modelsCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use: "models", Short: "The configured models: name, provider, reachable, context limits", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			list, err := cl.Models(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, m := range list.Models {
				state := "reachable"
				if !m.Reachable {
					state = "unreachable: " + m.Problem
				}
				def := ""
				if m.Default {
					def = " (default)"
				}
				fmt.Fprintf(out, "%-16s %-10s %-24s %s%s\n", m.Name, m.Provider, m.Model, state, def)
			}
			return nil
		},
	}
}
