-- Cockpit depth (issue 16).
--   studio_operator_proposals.impact: destructive or irreversible (the
--     application's command table says which), NULL for neither.
--   studio_operator_proposals.target_name: the target's human name when the
--     proposal was made, shown beside its id.
--   studio_runs.workflow_id, workflow_step: the workflow launch a run is a
--     step of (0-based), NULL for runs launched on their own.
--   admin_events(actor, id), (created_at, id): the audit trail's filters.

ALTER TABLE studio_operator_proposals ADD COLUMN impact TEXT
  CHECK (impact IS NULL OR impact IN ('destructive', 'irreversible'));
ALTER TABLE studio_operator_proposals ADD COLUMN target_name TEXT;

ALTER TABLE studio_runs ADD COLUMN workflow_id TEXT;
ALTER TABLE studio_runs ADD COLUMN workflow_step INTEGER;
CREATE INDEX idx_runs_workflow ON studio_runs(workflow_id, created_at);

CREATE INDEX idx_admin_events_actor ON admin_events(actor, id);
CREATE INDEX idx_admin_events_created ON admin_events(created_at, id);
