package main

import (
	"errors"
	"fmt"
	"os"
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
token of STUDIO_TOKEN (or --token): an agent principal's token, which it
requires — it never falls back to the data directory's owner token, so an
assistant never acts as the admin by a missing variable. Make one with

  studio principals add claude-desktop --role agent
  studio tokens create claude-desktop

Read tools answer and every command becomes a proposal that a human confirms
in the cockpit or with studio operator confirm. Logs go to stderr. See
docs/mcp.md for client configurations.`,
		Example: `  STUDIO_URL=http://127.0.0.1:8765 STUDIO_TOKEN=stu_... studio mcp`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token := cfg.token
			if token == "" {
				token = os.Getenv("STUDIO_TOKEN")
			}
			if token == "" {
				return exitError{exitUsage, errors.New(noMCPToken)}
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

// noMCPToken is why `studio mcp` refuses to start without a token.
const noMCPToken = `studio mcp needs an agent principal's token in STUDIO_TOKEN (or --token); it never uses the data directory's owner token. Make one:
  studio principals add claude-desktop --role agent
  studio tokens create claude-desktop
and give it to the MCP client's configuration as STUDIO_TOKEN (docs/mcp.md)`
