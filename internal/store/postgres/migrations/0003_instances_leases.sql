-- Instances and leases (issue 13): several daemons on one database.
--
-- Each daemon registers a row in studio_instances when it starts and renews
-- its lease on a short interval. A lease that is not renewed in time
-- expires; the first daemon whose reaper sees that marks the instance
-- reaped (a compare-and-set, so a renewal and a reaping never both win) and
-- the reapers then end the work the instance still owns. A reaped instance
-- never renews again: its daemon learns it lost its lease and exits.
--
-- Added columns:
--   studio_operator_turns.owner_instance: the instance that runs the turn:
--     the submitter while it is queued (any live instance with a free
--     worker may claim it), the runner while it is running, the executor of
--     its confirmed proposal while it awaits confirmation with one
--     executing; NULL while it waits for a human (any daemon may continue
--     it) and once it ended.
--   studio_operator_proposals.owner_instance: the instance executing a
--     confirmed proposal.
--   studio_runs.owner_instance: the instance executing a running run.

CREATE TABLE studio_instances (
  id               TEXT PRIMARY KEY,
  address          TEXT NOT NULL,
  pid              BIGINT NOT NULL,
  version          TEXT NOT NULL,
  started_at       DOUBLE PRECISION NOT NULL,
  heartbeat_at     DOUBLE PRECISION NOT NULL,
  lease_expires_at DOUBLE PRECISION NOT NULL,
  stopped_at       DOUBLE PRECISION,
  reaped_at        DOUBLE PRECISION
);

CREATE INDEX idx_instances_lease ON studio_instances(lease_expires_at) WHERE reaped_at IS NULL;

ALTER TABLE studio_operator_turns ADD COLUMN owner_instance TEXT;
ALTER TABLE studio_operator_proposals ADD COLUMN owner_instance TEXT;
ALTER TABLE studio_runs ADD COLUMN owner_instance TEXT;

CREATE INDEX idx_operator_turns_owner ON studio_operator_turns(owner_instance) WHERE owner_instance IS NOT NULL;
CREATE INDEX idx_operator_proposals_owner ON studio_operator_proposals(owner_instance) WHERE owner_instance IS NOT NULL;
CREATE INDEX idx_runs_owner ON studio_runs(owner_instance) WHERE owner_instance IS NOT NULL;
