-- Issue 15: conversations beyond the peers (fork, pin, search, recover, a
-- model per conversation, amended proposals).
--
-- Added columns:
--   studio_operator_conversations.pinned: 0/1, pinned conversations list first.
--   studio_operator_conversations.model: the configured model its turns use
--     (NULL: the daemon's default).
--   studio_operator_conversations.forked_from_id, forked_from_sequence: the
--     source conversation and the done frame the fork's history ends with.
--   studio_operator_conversations.forked_through: the fork's last copied
--     frame (its frames 1..forked_through are the source's history).
--   studio_operator_proposals.amended_from: the proposal this one amends.
--
-- studio_operator_fork_turns maps each turn a fork copied to its source
-- turn: the fork's frames need turns of its own (a turn belongs to one
-- conversation, and purging the source must not orphan the fork).
--
-- Search: one document per complete turn (its text frames, written when its
-- done frame is) and one per conversation title, in
-- studio_operator_search_docs, indexed by the FTS5 table
-- studio_operator_search. Triggers keep both in step with frames and
-- conversations (append, fork, purge), so no write path has to remember.

ALTER TABLE studio_operator_conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1));
ALTER TABLE studio_operator_conversations ADD COLUMN model TEXT;
ALTER TABLE studio_operator_conversations ADD COLUMN forked_from_id TEXT;
ALTER TABLE studio_operator_conversations ADD COLUMN forked_from_sequence INTEGER;
ALTER TABLE studio_operator_conversations ADD COLUMN forked_through INTEGER;
ALTER TABLE studio_operator_proposals ADD COLUMN amended_from TEXT;

CREATE INDEX idx_operator_conversations_pinned
  ON studio_operator_conversations(pinned, created_at, id);

CREATE TABLE studio_operator_fork_turns (
  conversation_id    TEXT NOT NULL REFERENCES studio_operator_conversations(id),
  request_id         TEXT NOT NULL, -- the fork's turn
  source_request_id  TEXT NOT NULL,
  PRIMARY KEY (conversation_id, source_request_id)
);

CREATE INDEX idx_operator_fork_turns_request ON studio_operator_fork_turns(request_id);

CREATE TABLE studio_operator_search_docs (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id  TEXT NOT NULL,
  request_id       TEXT NOT NULL, -- '' for the title
  content          TEXT NOT NULL
);

CREATE INDEX idx_operator_search_docs_conversation
  ON studio_operator_search_docs(conversation_id, request_id);

CREATE VIRTUAL TABLE studio_operator_search USING fts5(
  content, content='studio_operator_search_docs', content_rowid='id',
  tokenize='unicode61 remove_diacritics 2');

CREATE TRIGGER studio_operator_search_docs_ai AFTER INSERT ON studio_operator_search_docs BEGIN
  INSERT INTO studio_operator_search(rowid, content) VALUES (new.id, new.content);
END;

CREATE TRIGGER studio_operator_search_docs_ad AFTER DELETE ON studio_operator_search_docs BEGIN
  INSERT INTO studio_operator_search(studio_operator_search, rowid, content) VALUES ('delete', old.id, old.content);
END;

-- A turn's text, once its done frame is written: runs of text frames of one
-- role joined as they streamed (deltas cut words), a new line where another
-- frame or role came between.
-- A fork's copied turns are not indexed again: the fork copies their
-- documents (sqlstore's ForkConversation), a fraction of the cost.
-- group_concat runs as a window function ordered by sequence, not as
-- group_concat(... ORDER BY ...): that form needs SQLite 3.44, and an older
-- sqlite3 would read the whole schema as malformed (see 0007, which
-- replaces the trigger in databases created with that form).
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

CREATE TRIGGER studio_operator_search_turn_purged AFTER DELETE ON studio_operator_frames
WHEN old.frame_type = 'done' BEGIN
  DELETE FROM studio_operator_search_docs WHERE conversation_id = old.conversation_id AND request_id = old.request_id;
END;

CREATE TRIGGER studio_operator_search_title_ai AFTER INSERT ON studio_operator_conversations
WHEN new.title IS NOT NULL BEGIN
  INSERT INTO studio_operator_search_docs (conversation_id, request_id, content) VALUES (new.id, '', new.title);
END;

CREATE TRIGGER studio_operator_search_title_au AFTER UPDATE OF title ON studio_operator_conversations BEGIN
  DELETE FROM studio_operator_search_docs WHERE conversation_id = new.id AND request_id = '';
  INSERT INTO studio_operator_search_docs (conversation_id, request_id, content)
  SELECT new.id, '', new.title WHERE new.title IS NOT NULL;
END;

CREATE TRIGGER studio_operator_search_conversation_purged AFTER DELETE ON studio_operator_conversations BEGIN
  DELETE FROM studio_operator_search_docs WHERE conversation_id = old.id;
END;

-- What existed before this migration.
INSERT INTO studio_operator_search_docs (conversation_id, request_id, content)
SELECT id, '', title FROM studio_operator_conversations WHERE title IS NOT NULL;

INSERT INTO studio_operator_search_docs (conversation_id, request_id, content)
SELECT d.conversation_id, d.request_id,
       coalesce((SELECT group_concat(json_extract(f.payload_json, '$.content'), '')
                          OVER (ORDER BY f.sequence ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
                 FROM studio_operator_frames f
                 WHERE f.conversation_id = d.conversation_id AND f.request_id = d.request_id AND f.frame_type = 'text'
                 LIMIT 1), '')
FROM studio_operator_frames d WHERE d.frame_type = 'done';
