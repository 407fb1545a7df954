package main

import (
	"fmt"
	"os"

	"github.com/studio/operator/internal/policy"
)

// loadPolicy builds the policy engine of `studio serve`: the built-in
// policies with the four-eyes levels, and the team's files.
func loadPolicy(levels, paths []string) (*policy.Engine, error) {
	files, err := readPolicyFiles(paths)
	if err != nil {
		return nil, err
	}
	return policy.New(policy.Options{SecondApproverFor: levels, Files: files})
}

func readPolicyFiles(paths []string) ([]policy.File, error) {
	files := make([]policy.File, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		files = append(files, policy.File{Name: p, Text: b})
	}
	return files, nil
}
