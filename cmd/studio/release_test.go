package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReleaseConfigNamesFilesThatExist: every file the release packs — the
// packages' contents and scripts, the image's Dockerfile, the archives'
// extra files — is in the tree, and the unit the packages install runs the
// binary where they put it (CI has no goreleaser to try a release).
func TestReleaseConfigNamesFilesThatExist(t *testing.T) {
	t.Parallel()
	cfg, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`(?m)^\s*(?:- src:|src:|dockerfile:|postinstall:|preremove:|-)\s+((?:deploy|docs)/[\w./-]+|README\.md)\s*$`)
	files := named.FindAllStringSubmatch(string(cfg), -1)
	if len(files) < 8 {
		t.Fatalf("found %d files named in .goreleaser.yaml, want the archives', packages' and image's", len(files))
	}
	for _, m := range files {
		if _, err := os.Stat("../../" + m[1]); err != nil {
			t.Errorf(".goreleaser.yaml names %s: %v", m[1], err)
		}
	}
	if !regexp.MustCompile(`(?m)^\s*bindir: /usr/bin$`).Match(cfg) {
		t.Fatal("the packages' bindir is not /usr/bin")
	}
	unit, err := os.ReadFile("../../deploy/studio.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/usr/bin/studio ") {
		t.Fatal("the unit the packages install does not run /usr/bin/studio")
	}
	for _, script := range []string{"deploy/packaging/postinstall.sh", "deploy/packaging/preremove.sh"} {
		if fi, err := os.Stat("../../" + script); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not an executable script: %v", script, err)
		}
	}
}
