package store

import "context"

// A pause point inside a write's transaction: what a test needs to stop a
// daemon with its statements written and its COMMIT not yet sent (the
// daemon's --help lists no such thing; cmd/studio wires it only from a
// test harness's variable).

type beforeCommitKey struct{}

// WithBeforeCommit is ctx carrying f, which a write transaction started
// with it (not merged with others) calls after its statements, before its
// COMMIT.
func WithBeforeCommit(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, beforeCommitKey{}, f)
}

// BeforeCommit calls the hook ctx carries (WithBeforeCommit), if any.
func BeforeCommit(ctx context.Context) {
	if f, ok := ctx.Value(beforeCommitKey{}).(func()); ok {
		f()
	}
}
