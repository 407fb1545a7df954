-- Reserved: changes in flight on other branches take version 11
-- (webhooks 9, conversation ownership 10, MCP 11). This placeholder keeps
-- the versions contiguous up to 12 (the application change log) on this
-- branch alone; the merge replaces it.
SELECT 1;
