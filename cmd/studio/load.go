package main

import (
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/bench"
)

func newLoadCmd(cfg *config) *cobra.Command {
	var conversations, turns int
	var instruction string
	c := &cobra.Command{
		Use:   "load",
		Short: "Measure a running daemon: concurrent conversations submitting turns and streaming them to done",
		Long: `load drives a running daemon through its public API: each conversation submits
its turns one after another and follows each on the SSE stream until its done
frame. It reports throughput and latency percentiles: accept (POST .../turns
answered), first frame (the first frame after the instruction), and done. Use
it against a daemon started with the model you want to measure (the offline
model, or a script with sleeps to model a slow provider).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			return bench.RunLoad(cmd.Context(), cmd.OutOrStdout(), cl, conversations, turns, instruction)
		},
	}
	c.Flags().IntVar(&conversations, "conversations", 20, "conversations at once")
	c.Flags().IntVar(&turns, "turns", 5, "turns per conversation, one after another")
	c.Flags().StringVar(&instruction, "instruction", "how many runs failed in the last day?", "the instruction every turn sends")
	return c
}
