-- Conversation ownership and visibility.
--
-- studio_operator_conversations.owner: the name of the principal that
--   created the conversation (principal names are unique for ever). Rows
--   from before principals belong to the bootstrap admin, owner.
-- studio_operator_conversations.visibility: private (its owner and admins
--   see it) or team (every principal sees it). Rows from before are team:
--   everyone saw them.

ALTER TABLE studio_operator_conversations ADD COLUMN owner TEXT NOT NULL DEFAULT 'owner';
ALTER TABLE studio_operator_conversations ADD COLUMN visibility TEXT NOT NULL DEFAULT 'team' CHECK (visibility IN ('private', 'team'));

CREATE INDEX idx_operator_conversations_owner ON studio_operator_conversations(owner, visibility);
