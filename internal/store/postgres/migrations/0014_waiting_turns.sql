-- Turns sent while another runs (docs/protocol.md §4, whenBusy).
--
-- studio_operator_turns.queue_order: set while a turn submitted with
--   whenBusy enqueue or interrupt waits behind its conversation's active
--   turn (lowest first; an interrupt takes one below every other). Such a
--   turn is queued, owned by no instance and has no frame yet: the
--   transaction that ends the active turn makes the first one active,
--   stores its instruction frame and clears its queue_order. NULL for
--   every other turn.
-- studio_operator_turns.interrupts: the request id of the active turn an
--   interrupt asked to cancel.

ALTER TABLE studio_operator_turns ADD COLUMN queue_order BIGINT;
ALTER TABLE studio_operator_turns ADD COLUMN interrupts TEXT;

CREATE INDEX idx_operator_turns_waiting ON studio_operator_turns(conversation_id, queue_order) WHERE queue_order IS NOT NULL;
