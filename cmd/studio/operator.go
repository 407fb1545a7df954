package main

import (
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
)

// operatorClient builds the API client from --server and the token.
// operatorClient checks the output format, then connects: a bad -o is
// refused before any request.
func (o *output) operatorClient(cfg *config) (*apiclient.Client, error) {
	if _, err := o.isJSON(); err != nil {
		return nil, err
	}
	return operatorClient(cfg)
}

func operatorClient(cfg *config) (*apiclient.Client, error) {
	token := cfg.token
	if token == "" {
		var err error
		if token, err = clientToken(cfg); err != nil {
			return nil, err
		}
	} else {
		cfg.tokenSource = "the --token flag"
	}
	server := cfg.server
	if server == "" {
		server = "http://" + cfg.addr
	}
	cl := apiclient.New(server, token, nil)
	cl.UserAgent = httpapi.CLIUserAgent + readVersion().Version
	return cl, nil
}

func newOperatorCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Talk to a running daemon's operator: conversations, turns, streams",
		Example: `  studio operator send "show the failed runs"
  studio operator conversations list -o json
  studio operator proposals
  studio operator confirm PROPOSAL_ID`,
	}
	convs := &cobra.Command{Use: "conversations", Aliases: []string{"conv"}, Short: "Create, list, show, archive and delete conversations"}
	convs.AddCommand(convCreateCmd(cfg), convListCmd(cfg), convShowCmd(cfg), convArchiveCmd(cfg, true), convArchiveCmd(cfg, false),
		convRenameCmd(cfg), convDeleteCmd(cfg), convRestoreCmd(cfg), convPinCmd(cfg, true), convPinCmd(cfg, false),
		convModelCmd(cfg), convSearchCmd(cfg))
	cmd.AddCommand(convs, sendCmd(cfg), streamCmd(cfg), cancelCmd(cfg), ticketCmd(cfg), newLoadCmd(cfg),
		proposalsCmd(cfg), confirmCmd(cfg), denyCmd(cfg), forkCmd(cfg), modelsCmd(cfg))
	return cmd
}

// printJSON writes v as indented JSON, times in RFC 3339 (jsontime.go).
func printJSON(w io.Writer, v any) error {
	b, err := marshalOutput(v)
	if err != nil {
		return err
	}
	v2 := jsontext.Value(b)
	_ = v2.Indent()
	_, err = fmt.Fprintln(w, string(v2))
	return err
}

// marshalOutput is v as the CLI prints JSON: compact, times in RFC 3339.
func marshalOutput(v any) ([]byte, error) {
	b, err := protocol.Marshal(v)
	if err != nil {
		return nil, err
	}
	return readableTimes(b)
}
