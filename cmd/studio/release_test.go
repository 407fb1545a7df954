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
	named := regexp.MustCompile(`(?m)^\s*(?:- src:|src:|dockerfile:|postinstall:|preremove:|-)\s+((?:deploy|docs)/[\w./-]+|README\.md|LICENSE)\s*$`)
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

// TestReleaseLicense: the project's license (Apache-2.0) is in the tree
// whole, every release artefact says so (the packages' metadata, the
// image's label) and carries the text, and no comment claims a base image
// pinned by digest where the Dockerfile names a tag.
func TestReleaseLicense(t *testing.T) {
	t.Parallel()
	license, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"Apache License\n                           Version 2.0, January 2004",
		"TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "9. Accepting Warranty or Additional Liability.",
		"END OF TERMS AND CONDITIONS", "APPENDIX: How to apply the Apache License to your work."} {
		if !strings.Contains(string(license), part) {
			t.Errorf("LICENSE is not the whole Apache License 2.0 text: no %q", part)
		}
	}
	b, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^nfpms:(?:\n .*)*\n    license: Apache-2\.0$`),
		regexp.MustCompile(`(?m)^archives:(?:\n .*)*\n      - LICENSE$`),
		regexp.MustCompile(`(?m)^nfpms:(?:\n .*)*\n      - src: LICENSE$`),
		regexp.MustCompile(`(?m)^\s+org\.opencontainers\.image\.licenses: Apache-2\.0$`),
	} {
		if !want.MatchString(cfg) {
			t.Errorf(".goreleaser.yaml does not match %s", want)
		}
	}
	for _, dockerfile := range []string{"../../deploy/release.Dockerfile", "../../Dockerfile", "../../.goreleaser.yaml"} {
		b, err := os.ReadFile(dockerfile)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		pinned := regexp.MustCompile(`(?m)^FROM \S+@sha256:[0-9a-f]{64}`).MatchString(text)
		if dockerfile == "../../.goreleaser.yaml" {
			rel, _ := os.ReadFile("../../deploy/release.Dockerfile")
			pinned = regexp.MustCompile(`(?m)^FROM \S+@sha256:[0-9a-f]{64}`).Match(rel)
		}
		if claim := regexp.MustCompile(`(?m)^#.*\bpinned by digest\b`).FindString(text); claim != "" && !pinned {
			t.Errorf("%s claims a digest-pinned base where it names a tag: %q", dockerfile, claim)
		}
	}
}
