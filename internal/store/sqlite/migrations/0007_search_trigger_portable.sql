-- The search trigger of 0004 ordered a turn's text with
-- group_concat(... ORDER BY ...), an aggregate form SQLite has only from
-- 3.44. An older SQLite (Debian 12's and Ubuntu 22.04's sqlite3, Python's
-- sqlite3 module, anything linked against the system library) then reads
-- the whole schema as malformed and opens nothing. The same document is
-- built here with group_concat as a window function over the text frames
-- in sequence order (SQLite 3.25 and later): every row of the window sees
-- the whole turn, so the first one is the document.
--
-- Databases created by a 0004 that already has this form are unchanged by
-- dropping and recreating the trigger.

DROP TRIGGER IF EXISTS studio_operator_search_turn;

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
          WHERE f.conversation_id = new.conversation_id AND f.request_id = new.request_id AND f.frame_type = 'text')
    LIMIT 1), '');
END;
