-- Takeovers that a stalled daemon cannot block.
--
-- A daemon whose database sessions hang (a frozen backend, a half-open
-- connection, a stuck proxy) may hold row locks on its own instance row
-- for as long as it hangs. The reaping of an expired lease is therefore
-- recorded in a table of its own, which no daemon locks for longer than
-- one insert: a reaper reads the instance's lease without a lock and
-- inserts the reaping; studio_instances.reaped_at follows when its row is
-- free (the rows another session holds are passed over).
--
-- Added:
--   studio_instance_reaps: one row per reaped instance: when, and by
--     which instance. An instance is reaped when it has a row here or
--     studio_instances.reaped_at is set.
--   studio_operator_proposals.executed_audit_id: the admin_events row the
--     confirmed command's own write appended, in the transaction that set
--     executed_at: a daemon that takes the proposal over reads what the
--     command did there and records the proposal as executed.

CREATE TABLE studio_instance_reaps (
  instance_id TEXT PRIMARY KEY,
  reaped_at   DOUBLE PRECISION NOT NULL,
  reaped_by   TEXT NOT NULL
);

ALTER TABLE studio_operator_proposals ADD COLUMN executed_audit_id BIGINT;
