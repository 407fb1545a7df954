package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestReferencesResolve: every reference the repository makes to one of its
// own files, to a numbered section of docs/design.md or docs/protocol.md, or
// to a Markdown heading (by link anchor or by quoted name) exists; and
// nothing points at documents outside the repository.
func TestReferencesResolve(t *testing.T) {
	t.Parallel()
	problems, scanned, err := checkReferences("..")
	if err != nil {
		t.Fatal(err)
	}
	if scanned.files < 100 || scanned.refs < 200 {
		t.Fatalf("scanned %d files and %d references: the walk missed the repository", scanned.files, scanned.refs)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestReferenceCheckFindsBadOnes plants one bad reference of each kind in a
// small tree beside good ones: the check reports exactly the bad ones.
func TestReferenceCheckFindsBadOnes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/design.md", "# Design\n\n## 1. One\n\n### 1.2 Sub part\n\nSee §1.2 and §7.\n\n## 2. Two\n")
	write("docs/protocol.md", "# Protocol\n\n## 1. Wire rules\n\nAs section 1 says; section 4 is not here.\n")
	write("README.md", "[ok](docs/design.md#12-sub-part) [gone](docs/missing.md) [anchor](docs/design.md#3-three) [web](https://example.com/x.md)\n"+
		"![picture](docs/images/none.png) [self](#readme-heading)\n\n## README heading\n")
	write("internal/x/x.go", "package x\n\n// Good: docs/design.md §1, §2 and docs/protocol.md §1; internal/x/x.go.\n"+
		"// Bad: docs/design.md §3 and docs/design.md §1.2, §1.5; docs/protocol.md §9.\n"+
		"// A file that is not there: internal/y/y.go; docs/gone.md.\n"+
		"// By name: docs/design.md, \"Two\" is fine, docs/design.md, \"Three\" is not;\n"+
		"// docs/design.md, \"Sub\n// part\" is fine across lines, docs/design.md, \"Sub\n// whole\" is not.\n"+
		"// Outside: "+"ADR-"+"0083 D4, "+"DESIGN"+".md, ../"+"shared/x.\n")
	write("web/a.js", "// docs/design.md §8\n")
	write("deploy/c.yaml", "# docs/protocol.md §2\n")
	write(".ci/run", "# see docs/absent.md\n")
	write("node_modules/z/z.md", "[ignored](nowhere.md)\n")

	problems, _, err := checkReferences(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`README.md: link docs/missing.md: no such file`,
		`README.md: link docs/design.md#3-three: no heading "3-three" in docs/design.md`,
		`README.md: link docs/images/none.png: no such file`,
		`docs/design.md: §7: no section 7 in docs/design.md`,
		`docs/protocol.md: section 4: no section 4 in docs/protocol.md`,
		`internal/x/x.go: docs/design.md §3: no section 3 in docs/design.md`,
		`internal/x/x.go: docs/design.md §1.5: no section 1.5 in docs/design.md`,
		`internal/x/x.go: docs/protocol.md §9: no section 9 in docs/protocol.md`,
		`internal/x/x.go: internal/y/y.go: no such file`,
		`internal/x/x.go: docs/gone.md: no such file`,
		`internal/x/x.go: docs/design.md, "Three": no heading "Three" in docs/design.md`,
		`internal/x/x.go: docs/design.md, "Sub whole": no heading "Sub whole" in docs/design.md`,
		`internal/x/x.go: mentions "` + "ADR-" + `0083", a document outside the repository`,
		`internal/x/x.go: mentions "` + "DESIGN" + `.md", a document outside the repository`,
		`internal/x/x.go: mentions "../` + "shared" + `", a document outside the repository`,
		`web/a.js: docs/design.md §8: no section 8 in docs/design.md`,
		`deploy/c.yaml: docs/protocol.md §2: no section 2 in docs/protocol.md`,
		`.ci/run: docs/absent.md: no such file`,
	}
	slices.Sort(want)
	slices.Sort(problems)
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
}

// outside are the names of documents that are not in the repository; a
// reader who clones it cannot follow them. Written in pieces so that this
// file does not mention them itself.
var outside = []string{"ADR-" + "0083", "DESIGN" + ".md", "../" + "shared"}

var (
	// repoPath is a path into the repository: under one of its top-level
	// directories, or one of its top-level files. The character before it
	// must not continue a path (so ../../docs/x.md and an import path are
	// not read as references).
	repoPath = regexp.MustCompile(`(?:^|[^\w./-])((?:docs|internal|cmd|deploy|web|checks|\.ci)/[\w./-]*[\w/]|README\.md|Dockerfile|\.goreleaser\.yaml|go\.mod)`)
	// sectionRef is a numbered-section reference: docs/design.md §9.3,
	// and any further "§N" listed after it (", §11", "; §4", " and §12").
	// In the manual's own pages the docs/ prefix may be left out.
	sectionRef = regexp.MustCompile(`(?:docs/)?(design|protocol)\.md((?:(?:,|;| and| or)? ?§\d+(?:\.\d+)*)+)`)
	sectionNum = regexp.MustCompile(`§(\d+(?:\.\d+)*)`)
	// namedRef is a heading named in quotes after its file:
	// docs/teams.md, "Sign-in behind a proxy".
	namedRef = regexp.MustCompile(`((?:docs/[\w-]+|README)\.md), "([^"]+)"`)
	// continued is a line break inside a comment: a name quoted across
	// two comment lines is one name.
	continued = regexp.MustCompile(`\s*\n\s*(?://|#|--|\*)?\s*`)
	// mdLink is a Markdown link or image target.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// heading is a Markdown ATX heading; numbered is one that starts with
	// a section number ("## 9. Proposals", "### 9.3 The confirm").
	heading   = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	numbered  = regexp.MustCompile(`^(\d+(?:\.\d+)*)\.?\s`)
	htmlID    = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	selfNum   = regexp.MustCompile(`(?:^|[^\w/.])§(\d+(?:\.\d+)*)`)
	selfWord  = regexp.MustCompile(`\bsection (\d+)\b`)
	fenceLine = regexp.MustCompile("(?m)^```.*$")
)

type counts struct{ files, refs int }

// checkReferences walks the tree at root and returns one line per
// reference that does not resolve, "file: reference: why".
func checkReferences(root string) (problems []string, scanned counts, err error) {
	docs := map[string]*mdDoc{}
	load := func(rel string) *mdDoc {
		if d, ok := docs[rel]; ok {
			return d
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			docs[rel] = nil
			return nil
		}
		d := parseMarkdown(string(b))
		docs[rel] = d
		return d
	}
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
		return err == nil
	}
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			switch e.Name() {
			case ".git", "node_modules", "artifacts", "bin", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if !scannedFile(rel) || rel == "docs/references_test.go" {
			// This file plants bad references to test the check.
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		scanned.files++
		text := string(b)
		report := func(format string, args ...any) {
			problems = append(problems, rel+": "+fmt.Sprintf(format, args...))
		}
		for _, name := range outside {
			if strings.Contains(text, name) {
				report("mentions %q, a document outside the repository", name)
			}
		}
		paths := text
		if strings.HasSuffix(rel, ".md") {
			// A link's target is relative to the page: checkMarkdown's.
			paths = mdLink.ReplaceAllString(text, "]()")
		}
		for _, m := range repoPath.FindAllStringSubmatch(paths, -1) {
			scanned.refs++
			ref := strings.TrimRight(m[1], "./")
			if ref != "" && !generated(root, ref) && !exists(ref) {
				report("%s: no such file", m[1])
			}
		}
		for _, m := range sectionRef.FindAllStringSubmatch(text, -1) {
			file := "docs/" + m[1] + ".md"
			d := load(file)
			for _, n := range sectionNum.FindAllStringSubmatch(m[2], -1) {
				scanned.refs++
				if d == nil || !d.sections[n[1]] {
					report("%s §%s: no section %s in %s", file, n[1], n[1], file)
				}
			}
		}
		for _, m := range namedRef.FindAllStringSubmatch(text, -1) {
			scanned.refs++
			name := continued.ReplaceAllString(m[2], " ")
			if d := load(m[1]); d == nil || !d.names[slug(name)] {
				report("%s, %q: no heading %q in %s", m[1], name, name, m[1])
			}
		}
		if strings.HasSuffix(rel, ".md") {
			problems = append(problems, checkMarkdown(rel, text, load, exists, &scanned)...)
		}
		return nil
	})
	return problems, scanned, err
}

// generated says whether a path is one the tests, npm or a person write,
// git-ignored and absent from a fresh clone: test artifacts, installed
// node modules, and a file made from its committed .example.
func generated(root, rel string) bool {
	parts := strings.Split(rel, "/")
	if slices.Contains(parts, "artifacts") || slices.Contains(parts, "node_modules") {
		return true
	}
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)) + ".example")
	return err == nil
}

// scannedFile says whether a file's references are checked: source,
// Markdown, configuration and CI files.
func scannedFile(rel string) bool {
	if strings.HasPrefix(rel, ".ci/") {
		return true
	}
	switch path.Ext(rel) {
	case ".go", ".js", ".md", ".yml", ".yaml", ".sql", ".service", ".env":
		return true
	}
	switch path.Base(rel) {
	case "Dockerfile", "Caddyfile":
		return true
	}
	return strings.HasSuffix(rel, ".Dockerfile")
}

// checkMarkdown checks a Markdown file's links (relative to the file) and
// its references to its own numbered sections (§N, "section N").
func checkMarkdown(rel, text string, load func(string) *mdDoc, exists func(string) bool, scanned *counts) (problems []string) {
	report := func(format string, args ...any) {
		problems = append(problems, rel+": "+fmt.Sprintf(format, args...))
	}
	self := load(rel)
	prose := stripCode(text)
	for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		scanned.refs++
		file, anchor, _ := strings.Cut(target, "#")
		doc := self
		if file != "" {
			resolved := path.Clean(path.Join(path.Dir(rel), file))
			if !exists(resolved) {
				report("link %s: no such file", target)
				continue
			}
			if !strings.HasSuffix(resolved, ".md") {
				continue
			}
			doc, file = load(resolved), resolved
		} else {
			file = rel
		}
		if anchor != "" && (doc == nil || !doc.anchors[anchor]) {
			report("link %s: no heading %q in %s", target, anchor, file)
		}
	}
	if len(self.sections) == 0 {
		return problems
	}
	// A §N listed after a file name is that file's, checked by
	// checkReferences.
	others := sectionRef.FindAllStringIndex(prose, -1)
	for _, re := range []*regexp.Regexp{selfNum, selfWord} {
		for _, m := range re.FindAllStringSubmatchIndex(prose, -1) {
			n := prose[m[2]:m[3]]
			if slices.ContainsFunc(others, func(o []int) bool { return o[0] <= m[2] && m[3] <= o[1] }) {
				continue
			}
			scanned.refs++
			if !self.sections[n] {
				if re == selfNum {
					report("§%s: no section %s in %s", n, n, rel)
				} else {
					report("section %s: no section %s in %s", n, n, rel)
				}
			}
		}
	}
	return problems
}

// mdDoc is what references into a Markdown file can name: its headings'
// anchors and its section numbers.
type mdDoc struct {
	anchors  map[string]bool
	sections map[string]bool
	// names are the headings' anchors without their section numbers: a
	// heading named in prose ("Two") is "2. Two".
	names map[string]bool
}

func parseMarkdown(text string) *mdDoc {
	d := &mdDoc{anchors: map[string]bool{}, sections: map[string]bool{}, names: map[string]bool{}}
	seen := map[string]int{}
	prose := stripCode(text)
	for _, m := range heading.FindAllStringSubmatch(prose, -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			d.anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			d.anchors[s] = true
		}
		seen[s]++
		d.names[s] = true
		if n := numbered.FindStringSubmatch(m[1]); n != nil {
			d.sections[n[1]] = true
			d.names[slug(m[1][len(n[0]):])] = true
		}
	}
	for _, m := range htmlID.FindAllStringSubmatch(prose, -1) {
		d.anchors[m[1]] = true
	}
	return d
}

// slug is a heading's anchor as GitHub makes it: lower case, punctuation
// other than hyphens and underscores dropped, spaces as hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// stripCode blanks fenced code blocks, whose text is an example, not a
// reference or a heading.
func stripCode(text string) string {
	fences := fenceLine.FindAllStringIndex(text, -1)
	if len(fences) < 2 {
		return text
	}
	b := []byte(text)
	for i := 0; i+1 < len(fences); i += 2 {
		for j := fences[i][0]; j < fences[i+1][1]; j++ {
			if b[j] != '\n' {
				b[j] = ' '
			}
		}
	}
	return string(b)
}
