// Package docs is the manual: the Markdown pages beside this file. Its test
// (references_test.go) checks that every reference in the repository — to a
// file, to a numbered section of design.md or protocol.md, to a heading by
// link or by name — resolves, so a reader who clones the repository can
// follow each one.
package docs
