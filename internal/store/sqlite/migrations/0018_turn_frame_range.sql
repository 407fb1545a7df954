-- A turn's frames are read through the frames' primary key, bounded by the
-- turn's own range, instead of through an index by request: every append
-- wrote an entry into that index as well as into the primary key's, each
-- in another place per conversation, and the writer's commits were mostly
-- those index pages (docs/benchmarks.md).
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
-- would scan the whole frames table for each turn removed. SQLite cannot
-- change a constraint in place, so the table is copied (its triggers are
-- created again on the copy).

ALTER TABLE studio_operator_turns ADD COLUMN first_sequence INTEGER;
ALTER TABLE studio_operator_turns ADD COLUMN last_sequence INTEGER;

UPDATE studio_operator_turns SET
  first_sequence = (SELECT MIN(f.sequence) FROM studio_operator_frames f WHERE f.request_id = studio_operator_turns.request_id),
  last_sequence = CASE WHEN status IN ('completed', 'failed', 'cancelled')
    THEN (SELECT MAX(f.sequence) FROM studio_operator_frames f WHERE f.request_id = studio_operator_turns.request_id) END;

UPDATE studio_operator_turns SET first_sequence = 0, last_sequence = 0
WHERE first_sequence IS NULL AND status IN ('completed', 'failed', 'cancelled');

CREATE UNIQUE INDEX idx_operator_turns_conversation_request
  ON studio_operator_turns(conversation_id, request_id);

CREATE TABLE studio_operator_frames_copy (
  conversation_id   TEXT NOT NULL REFERENCES studio_operator_conversations(id),
  sequence           INTEGER NOT NULL,
  request_id         TEXT NOT NULL,
  frame_type         TEXT NOT NULL,
  payload_json       JSON NOT NULL,
  created_at         REAL NOT NULL,
  PRIMARY KEY(conversation_id, sequence),
  FOREIGN KEY(conversation_id, request_id) REFERENCES studio_operator_turns(conversation_id, request_id)
);

INSERT INTO studio_operator_frames_copy (conversation_id, sequence, request_id, frame_type, payload_json, created_at)
SELECT conversation_id, sequence, request_id, frame_type, payload_json, created_at
FROM studio_operator_frames ORDER BY rowid;

DROP TABLE studio_operator_frames;

ALTER TABLE studio_operator_frames_copy RENAME TO studio_operator_frames;

-- 0007's search trigger, its turn's text frames read within the turn's
-- range (the done frame is the range's end).
CREATE TRIGGER studio_operator_search_turn AFTER INSERT ON studio_operator_frames
WHEN new.frame_type = 'done'
 AND NOT EXISTS (SELECT 1 FROM studio_operator_fork_turns WHERE request_id = new.request_id) BEGIN
  INSERT INTO studio_operator_search_docs (conversation_id, request_id, content)
  SELECT new.conversation_id, new.request_id, coalesce((
    SELECT group_concat(piece, '') OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
    FROM (SELECT f.sequence AS seq,
                 CASE WHEN EXISTS (SELECT 1 FROM studio_operator_frames p
                                   WHERE p.conversation_id = f.conversation_id AND p.sequence = f.sequence - 1
                                     AND p.request_id = f.request_id AND p.frame_type = 'text'
                                     AND json_extract(p.payload_json, '$.role') IS json_extract(f.payload_json, '$.role'))
                      THEN json_extract(f.payload_json, '$.content')
                      ELSE char(10) || json_extract(f.payload_json, '$.content') END AS piece
          FROM studio_operator_frames f
          WHERE f.conversation_id = new.conversation_id
            AND f.sequence BETWEEN coalesce((SELECT first_sequence FROM studio_operator_turns WHERE request_id = new.request_id), 0)
                               AND new.sequence
            AND f.request_id = new.request_id AND f.frame_type = 'text')
    LIMIT 1), '');
END;

CREATE TRIGGER studio_operator_search_turn_purged AFTER DELETE ON studio_operator_frames
WHEN old.frame_type = 'done' BEGIN
  DELETE FROM studio_operator_search_docs WHERE conversation_id = old.conversation_id AND request_id = old.request_id;
END;
