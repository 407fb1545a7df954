-- Issue 15: conversations beyond the peers (fork, pin, search, recover, a
-- model per conversation, amended proposals). The PostgreSQL twin of the
-- SQLite backend's 0004 (see there for the columns and tables).
--
-- Search is PostgreSQL full-text search: studio_operator_search_docs keeps
-- one document per complete turn and per title with a generated tsvector
-- ('simple' configuration: no stemming, like SQLite's unicode61), indexed
-- with GIN. Triggers keep it in step with frames and conversations.

ALTER TABLE studio_operator_conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1));
ALTER TABLE studio_operator_conversations ADD COLUMN model TEXT;
ALTER TABLE studio_operator_conversations ADD COLUMN forked_from_id TEXT;
ALTER TABLE studio_operator_conversations ADD COLUMN forked_from_sequence BIGINT;
ALTER TABLE studio_operator_conversations ADD COLUMN forked_through BIGINT;
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
  id               BIGSERIAL PRIMARY KEY,
  conversation_id  TEXT NOT NULL,
  request_id       TEXT NOT NULL, -- '' for the title
  content          TEXT NOT NULL,
  tsv              tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED
);

CREATE INDEX idx_operator_search_docs_conversation
  ON studio_operator_search_docs(conversation_id, request_id);
CREATE INDEX idx_operator_search_docs_tsv ON studio_operator_search_docs USING GIN (tsv);

-- A turn's text, once its done frame is written: runs of text frames of one
-- role joined as they streamed (deltas cut words), a new line where another
-- frame or role came between.
CREATE FUNCTION studio_operator_search_turn_text(conv TEXT, req TEXT) RETURNS TEXT
LANGUAGE sql STABLE AS $$
  SELECT coalesce(string_agg(
           CASE WHEN EXISTS (SELECT 1 FROM studio_operator_frames p
                             WHERE p.conversation_id = f.conversation_id AND p.sequence = f.sequence - 1
                               AND p.request_id = f.request_id AND p.frame_type = 'text'
                               AND (p.payload_json->>'role') IS NOT DISTINCT FROM (f.payload_json->>'role'))
                THEN f.payload_json->>'content'
                ELSE chr(10) || (f.payload_json->>'content') END, '' ORDER BY f.sequence), '')
  FROM studio_operator_frames f
  WHERE f.conversation_id = conv AND f.request_id = req AND f.frame_type = 'text'
$$;

CREATE FUNCTION studio_operator_search_frames() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    -- A fork's copied turns are not indexed again: the fork copies their
    -- documents (sqlstore's ForkConversation), a fraction of the cost.
    IF EXISTS (SELECT 1 FROM studio_operator_fork_turns WHERE request_id = NEW.request_id) THEN
      RETURN NULL;
    END IF;
    INSERT INTO studio_operator_search_docs (conversation_id, request_id, content)
    VALUES (NEW.conversation_id, NEW.request_id, studio_operator_search_turn_text(NEW.conversation_id, NEW.request_id));
  ELSE
    DELETE FROM studio_operator_search_docs WHERE conversation_id = OLD.conversation_id AND request_id = OLD.request_id;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER studio_operator_search_turn AFTER INSERT ON studio_operator_frames
  FOR EACH ROW WHEN (NEW.frame_type = 'done') EXECUTE FUNCTION studio_operator_search_frames();
CREATE TRIGGER studio_operator_search_turn_purged AFTER DELETE ON studio_operator_frames
  FOR EACH ROW WHEN (OLD.frame_type = 'done') EXECUTE FUNCTION studio_operator_search_frames();

CREATE FUNCTION studio_operator_search_titles() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM studio_operator_search_docs WHERE conversation_id = OLD.id;
    RETURN NULL;
  END IF;
  IF TG_OP = 'UPDATE' THEN
    DELETE FROM studio_operator_search_docs WHERE conversation_id = NEW.id AND request_id = '';
  END IF;
  IF NEW.title IS NOT NULL THEN
    INSERT INTO studio_operator_search_docs (conversation_id, request_id, content) VALUES (NEW.id, '', NEW.title);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER studio_operator_search_title_ai AFTER INSERT ON studio_operator_conversations
  FOR EACH ROW EXECUTE FUNCTION studio_operator_search_titles();
CREATE TRIGGER studio_operator_search_title_au AFTER UPDATE OF title ON studio_operator_conversations
  FOR EACH ROW EXECUTE FUNCTION studio_operator_search_titles();
CREATE TRIGGER studio_operator_search_conversation_purged AFTER DELETE ON studio_operator_conversations
  FOR EACH ROW EXECUTE FUNCTION studio_operator_search_titles();

-- What existed before this migration.
INSERT INTO studio_operator_search_docs (conversation_id, request_id, content)
SELECT id, '', title FROM studio_operator_conversations WHERE title IS NOT NULL;

INSERT INTO studio_operator_search_docs (conversation_id, request_id, content)
SELECT d.conversation_id, d.request_id, studio_operator_search_turn_text(d.conversation_id, d.request_id)
FROM studio_operator_frames d WHERE d.frame_type = 'done';
