-- studio_operator_stream_tickets.proxy_user: the sign-in proxy's user a
--   ticket was minted by (NULL for a bearer token's), so its redemption
--   signs that user in again as the proxy would now: an admin who removed
--   the link to a local principal, or gave the proxy principal's name to
--   another user, spends no ticket minted before.

ALTER TABLE studio_operator_stream_tickets ADD COLUMN proxy_user TEXT;
