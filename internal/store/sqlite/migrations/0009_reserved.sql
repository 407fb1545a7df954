-- Reserved: the webhooks outbox, in flight on another branch, takes
-- version 9. This placeholder keeps the versions contiguous until it
-- lands; the merge replaces it with that migration.
SELECT 1;
