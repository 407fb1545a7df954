-- A turn's frames are read through the frames' primary key, bounded by the
-- turn's own range, instead of through an index by request: every append
-- wrote an entry into that index as well as into the primary key's
-- (docs/benchmarks.md).
--
-- studio_operator_turns.first_sequence: the sequence of the turn's first
--   frame (its instruction), set when it is written; NULL while the turn
--   waits behind another and has no frame.
-- studio_operator_turns.last_sequence: the sequence of its done frame, set
--   when the turn ends; NULL while it runs. Only the conversation's active
--   turn writes frames, so a turn's frames lie in [first, last]. A turn
--   that ended with no frame left (purged) gets the empty range [0, 0].
--
-- The frames' foreign key to their turn becomes (conversation_id,
-- request_id): removing a turn checks for its frames through the primary
-- key's (conversation_id, ...) prefix, where a key on request_id alone
-- would scan the whole frames table for each turn removed.

ALTER TABLE studio_operator_turns ADD COLUMN first_sequence BIGINT, ADD COLUMN last_sequence BIGINT;

UPDATE studio_operator_turns t SET
  first_sequence = (SELECT MIN(f.sequence) FROM studio_operator_frames f WHERE f.request_id = t.request_id),
  last_sequence = CASE WHEN t.status IN ('completed', 'failed', 'cancelled')
    THEN (SELECT MAX(f.sequence) FROM studio_operator_frames f WHERE f.request_id = t.request_id) END;

UPDATE studio_operator_turns SET first_sequence = 0, last_sequence = 0
WHERE first_sequence IS NULL AND status IN ('completed', 'failed', 'cancelled');

ALTER TABLE studio_operator_turns
  ADD CONSTRAINT studio_operator_turns_conversation_request UNIQUE (conversation_id, request_id);

ALTER TABLE studio_operator_frames DROP CONSTRAINT studio_operator_frames_request_id_fkey;
ALTER TABLE studio_operator_frames ADD CONSTRAINT studio_operator_frames_turn_fkey
  FOREIGN KEY (conversation_id, request_id) REFERENCES studio_operator_turns(conversation_id, request_id);

DROP INDEX idx_operator_frames_request;

-- 0004's turn text, its frames read within the turn's range (the done
-- frame that calls it is the newest of them).
CREATE OR REPLACE FUNCTION studio_operator_search_turn_text(conv TEXT, req TEXT) RETURNS TEXT
LANGUAGE sql STABLE AS $$
  SELECT coalesce(string_agg(
           CASE WHEN EXISTS (SELECT 1 FROM studio_operator_frames p
                             WHERE p.conversation_id = f.conversation_id AND p.sequence = f.sequence - 1
                               AND p.request_id = f.request_id AND p.frame_type = 'text'
                               AND (p.payload_json->>'role') IS NOT DISTINCT FROM (f.payload_json->>'role'))
                THEN f.payload_json->>'content'
                ELSE chr(10) || (f.payload_json->>'content') END, '' ORDER BY f.sequence), '')
  FROM studio_operator_frames f
  WHERE f.conversation_id = conv
    AND f.sequence >= coalesce((SELECT t.first_sequence FROM studio_operator_turns t WHERE t.request_id = req), 0)
    AND f.request_id = req AND f.frame_type = 'text'
$$;
