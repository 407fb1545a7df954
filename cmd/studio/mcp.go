package main

import (
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/mcpserver"
)

// newMCPCmd is `studio mcp`: an MCP server on stdin/stdout for a desktop
// assistant that launches it, forwarding every call to a running daemon's
// /mcp with a principal's token, so that the daemon's rules hold (read
// tools run; commands become proposals a human confirms).
func newMCPCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve Studio's tools to an MCP client on stdin/stdout (through a running daemon)",
		Long: `Serve Studio's tools to an MCP client (a desktop assistant, an IDE agent) over
stdin/stdout. Every call goes to the running daemon's /mcp endpoint with the
token of STUDIO_TOKEN (an agent principal's: studio tokens create NAME), so
read tools answer and every command becomes a proposal that a human confirms
in the cockpit or with studio operator confirm. Logs go to stderr.`,
		Example: `  STUDIO_URL=http://127.0.0.1:8765 STUDIO_TOKEN=stu_... studio mcp`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token := cfg.token
			if token == "" {
				var err error
				if token, err = clientToken(cfg); err != nil {
					return err
				}
			}
			server := cfg.server
			if server == "" {
				server = "http://" + cfg.addr
			}
			p := mcpserver.NewProxy(strings.TrimSuffix(server, "/"), token, readVersion().Version)
			defer p.Close()
			ctx := cmd.Context()
			srv, err := p.Server(ctx)
			if err != nil {
				return exitError{exitUnreachable, fmt.Errorf("%w: is `studio serve` running, and is the token valid?", err)}
			}
			err = srv.Run(ctx, &mcp.StdioTransport{})
			if ctx.Err() != nil || err == nil || strings.Contains(err.Error(), "EOF") {
				return nil // the client closed stdin, or Ctrl-C
			}
			return err
		},
	}
}
