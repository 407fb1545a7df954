package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/metrics"
)

// version is stamped at release time with -ldflags "-X main.version=v1.2.3"
// (see .goreleaser.yaml); otherwise it comes from the build info.
var version = ""

// buildInfo is the binary's version: the stamped one, else the module
// version (go install ...@v1.2.3), else the VCS revision go build records
// (with -dirty for uncommitted changes), else "dev".
func buildInfo() metrics.Build {
	b := metrics.Build{Version: version}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if b.Version == "" {
			b.Version = "dev"
		}
		return b
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	switch {
	case b.Version != "":
	case info.Main.Version != "" && info.Main.Version != "(devel)":
		b.Version = info.Main.Version
	case b.Revision != "":
		b.Version = b.Revision[:min(12, len(b.Revision))]
		if dirty {
			b.Version += "-dirty"
		}
	default:
		b.Version = "dev"
	}
	return b
}

// versionLine is what `studio version` and `studio --version` print.
func versionLine() string {
	b := buildInfo()
	rev := ""
	if b.Revision != "" && b.Revision[:min(12, len(b.Revision))] != b.Version {
		rev = ", revision " + b.Revision
	}
	return fmt.Sprintf("studio %s (operator protocol version 1%s)", b.Version, rev)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
		},
	}
}
