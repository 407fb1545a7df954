-- Ownership epochs: fencing tokens for several daemons on one database.
--
-- Added columns:
--   studio_operator_turns.owner_epoch, studio_operator_proposals.owner_epoch,
--   studio_runs.owner_epoch: how many times the row's owner_instance has
--     changed. Every change of owner (a claim, a takeover by a reaper, a
--     confirmation, a hand-over, the end of the work) increases it, so an
--     owner that took the work at epoch N and lost it can never write it
--     again: its writes name epoch N and the row says N+1 or more.
--   studio_operator_proposals.executed_at: when the confirmed command's
--     own write committed, set in that write's transaction: a command runs
--     at most once even when the daemon cannot tell whether its first try
--     committed (a connection lost during COMMIT), and a takeover knows it ran.

ALTER TABLE studio_operator_turns ADD COLUMN owner_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE studio_operator_proposals ADD COLUMN owner_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE studio_runs ADD COLUMN owner_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE studio_operator_proposals ADD COLUMN executed_at DOUBLE PRECISION;
