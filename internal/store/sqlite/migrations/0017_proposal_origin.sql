-- studio_operator_proposals.origin: how the proposal came to be: 'turn'
--   (a model's or an agent's turn proposed it) or 'request' (a person
--   asked for the command directly and it waits for a second approver).
--   The cockpit words its card and its controls after it.

ALTER TABLE studio_operator_proposals ADD COLUMN origin TEXT NOT NULL DEFAULT 'turn';
