package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/protocol"
)

// version and revision are stamped at release time with -ldflags
// "-X main.version=v1.2.3 -X main.revision=<commit>" (see .goreleaser.yaml);
// otherwise they come from the build info, where go build records the
// module version and the VCS revision (unless built with -buildvcs=false or
// outside a repository).
var (
	version  = ""
	revision = ""
)

// binaryVersion is what `studio version -o json` prints.
type binaryVersion struct {
	Version         string `json:"version"`
	Module          string `json:"module"`
	ModuleVersion   string `json:"moduleVersion"`
	Revision        string `json:"revision"`
	Modified        bool   `json:"modified"`
	GoVersion       string `json:"goVersion"`
	ProtocolVersion int    `json:"protocolVersion"`
}

// readVersion describes this binary from its build info.
func readVersion() binaryVersion {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return versionFrom(info, version, revision)
}

// versionFrom is readVersion over a given build info (nil: none) and the
// stamped values. The version is the stamped one, else the module version
// (go install ...@v1.2.3, or the pseudo-version go build derives from the
// VCS), else the revision's first 12 characters (-dirty when modified),
// else "dev".
func versionFrom(info *debug.BuildInfo, stampedVersion, stampedRevision string) binaryVersion {
	v := binaryVersion{Version: stampedVersion, Revision: stampedRevision, GoVersion: runtime.Version(),
		ProtocolVersion: protocol.Version}
	if info != nil {
		v.Module, v.ModuleVersion, v.GoVersion = info.Main.Path, info.Main.Version, info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Revision == "" {
					v.Revision = s.Value
				}
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	switch {
	case v.Version != "":
	case v.ModuleVersion != "" && v.ModuleVersion != "(devel)":
		v.Version = v.ModuleVersion
	case v.Revision != "":
		v.Version = v.Revision[:min(12, len(v.Revision))]
		if v.Modified {
			v.Version += "-dirty"
		}
	default:
		v.Version = "dev"
	}
	return v
}

// buildInfo is the binary's version and revision for studio_build_info.
func buildInfo() metrics.Build {
	v := readVersion()
	return metrics.Build{Version: v.Version, Revision: v.Revision}
}

// versionLine is what `studio version` and `studio --version` print.
func versionLine() string { return versionText(readVersion()) }

func versionText(v binaryVersion) string {
	rev := ""
	if v.Revision != "" {
		rev = ", revision " + v.Revision
		if v.Modified {
			rev += " (modified)"
		}
	}
	return fmt.Sprintf("studio %s (operator protocol version %d%s, %s)", v.Version, v.ProtocolVersion, rev, v.GoVersion)
}

func newVersionCmd() *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version of this binary",
		Example: `  studio version
  studio version -o json | jq -r .revision`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion()
			return o.emit(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, versionText(v)) })
		},
	}
	o = addOutput(c)
	return c
}
