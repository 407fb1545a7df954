-- What authorization decisions need to know, kept where they happen.
--
-- studio_operator_proposals.project: the project of the resource the
--   command changes or creates ('' when none; NULL for proposals from
--   before), so a policy can decide by project.
-- studio_operator_stream_tickets.principal_id, token_hash, groups: who
--   minted the ticket and the SHA-256 of the bearer token it was minted
--   with (NULL for a sign-in proxy's user, with the groups the proxy named,
--   newline-separated), so its redemption decides again: a revoked token,
--   a disabled principal or a conversation no longer readable spends no
--   ticket. NULL for tickets from before (they expire within a minute).

ALTER TABLE studio_operator_proposals ADD COLUMN project TEXT;
ALTER TABLE studio_operator_stream_tickets ADD COLUMN principal_id TEXT;
ALTER TABLE studio_operator_stream_tickets ADD COLUMN token_hash TEXT;
ALTER TABLE studio_operator_stream_tickets ADD COLUMN groups TEXT;
