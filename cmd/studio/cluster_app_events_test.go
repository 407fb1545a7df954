package main

import (
	"context"
	"testing"

	"github.com/studio/operator/internal/studio"
)

// TestProcessClusterAppEvents: a run launched on daemon B shows on daemon
// A's application change stream, created and then finished; then, with A's
// stream caught up and waiting, a playbook B creates shows too: only B
// commits it and no work of A's follows it, so it reaches A's stream
// through PostgreSQL's notification alone.
func TestProcessClusterAppEvents(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "--model", "script:"+writeScript(t, `{"turns":[{"steps":[{"text":"ok"}]}]}`))
	a, b := c.ds[0], c.ds[1]
	ctx := testCtx(t)
	sctx, stop := context.WithCancel(ctx)
	events := make(chan studio.ChangeEvent, 100)
	ended := make(chan error, 1)
	go func() {
		ended <- a.client.AppEvents(sctx, 0, func(e studio.ChangeEvent) error {
			select {
			case events <- e:
			case <-sctx.Done():
			}
			return nil
		})
	}()
	t.Cleanup(func() { stop(); <-ended })

	var run studio.Run
	if err := b.client.Do(ctx, "POST", "/api/app/runs", map[string]any{"playbook": "audit-repo", "args": map[string]string{"repo": "x"}}, &run); err != nil {
		t.Fatal(err)
	}
	var created, changed bool
	for !(created && changed) {
		select {
		case e := <-events:
			if e.ID == run.ID {
				created = created || e.Type == "run.created"
				changed = changed || (created && e.Type == "run.changed")
			}
		case err := <-ended:
			t.Fatalf("A's change stream ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("A's change stream did not show B's run %s (created %v, changed %v)", run.ID, created, changed)
		}
	}

	var pb studio.Playbook
	if err := b.client.Do(ctx, "POST", "/api/app/playbooks", map[string]any{"name": "made-on-b", "prompt": "x"}, &pb); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case e := <-events:
			if e.Type == "playbook.changed" && e.ID == pb.ID {
				return
			}
		case err := <-ended:
			t.Fatalf("A's change stream ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("A's change stream did not show the playbook B created")
		}
	}
}
