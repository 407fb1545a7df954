package main

import (
	"runtime/debug"
	"testing"
)

// TestVersionFrom: the version and revision come from the build info's
// module version and VCS settings, unless stamped.
func TestVersionFrom(t *testing.T) {
	t.Parallel()
	const rev = "5f1dee1c0ffee0123456789abcdef0123456789a"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for name, c := range map[string]struct {
		info               *debug.BuildInfo
		version, revision  string
		wantVersion        string
		wantRevision       string
		wantModified       bool
		wantModuleVersion  string
		wantModuleAndGoSet bool
	}{
		"no build info":    {wantVersion: "dev"},
		"devel, no vcs":    {info: &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}, GoVersion: "go1.26"}, wantVersion: "dev", wantModuleVersion: "(devel)", wantModuleAndGoSet: true},
		"devel, vcs clean": {info: &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}, GoVersion: "go1.26", Settings: vcs("false")}, wantVersion: rev[:12], wantRevision: rev, wantModuleVersion: "(devel)", wantModuleAndGoSet: true},
		"devel, vcs dirty": {info: &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}, GoVersion: "go1.26", Settings: vcs("true")}, wantVersion: rev[:12] + "-dirty", wantRevision: rev, wantModified: true, wantModuleVersion: "(devel)", wantModuleAndGoSet: true},
		"pseudo-version":   {info: &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "v0.0.0-20261201233348-5f1dee1c0ffe+dirty"}, GoVersion: "go1.26", Settings: vcs("true")}, wantVersion: "v0.0.0-20261201233348-5f1dee1c0ffe+dirty", wantRevision: rev, wantModified: true, wantModuleVersion: "v0.0.0-20261201233348-5f1dee1c0ffe+dirty", wantModuleAndGoSet: true},
		"stamped":          {info: &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}, GoVersion: "go1.26"}, version: "v1.2.3", revision: "abc", wantVersion: "v1.2.3", wantRevision: "abc", wantModuleVersion: "(devel)", wantModuleAndGoSet: true},
	} {
		got := versionFrom(c.info, c.version, c.revision)
		if got.Version != c.wantVersion || got.Revision != c.wantRevision || got.Modified != c.wantModified || got.ModuleVersion != c.wantModuleVersion {
			t.Errorf("%s: %+v", name, got)
		}
		if c.wantModuleAndGoSet && (got.Module != "m" || got.GoVersion != "go1.26") {
			t.Errorf("%s: module and Go version: %+v", name, got)
		}
		if got.ProtocolVersion != 1 {
			t.Errorf("%s: protocol version %d", name, got.ProtocolVersion)
		}
	}
}
