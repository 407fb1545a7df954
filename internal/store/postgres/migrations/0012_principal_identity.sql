-- Where principals come from, how their names compare, who cancelled a turn.
--
-- studio_principals.origin: local (made by an admin, or the bootstrap
--   owner) or proxy (made by the sign-in proxy's header on first use). A
--   principal the proxy made before this column existed is found by its
--   creation's audit row (actor studio_auth_proxy); every other one is
--   local. Audit rows are never pruned, so none is missed.
-- studio_principals.name_key: the UTS #39 skeleton of the name; two
--   principals whose names look alike would share it, so it is unique.
--   Names from before are left NULL (they are their own PRECIS form, and
--   a pair of old look-alikes stays as it was); a new name is compared
--   with those by the daemon before it is inserted.
-- studio_principals.proxy_user: the sign-in proxy's user an admin linked
--   to this local principal; that user then signs in as it. NULL: none.
-- studio_operator_turns.cancel_requested_by: the principal (name) that
--   asked for the turn's cancellation; a proposal the cancel closes is
--   denied by it. NULL: nobody (the daemon's own ending, or before).

ALTER TABLE studio_principals ADD COLUMN origin TEXT NOT NULL DEFAULT 'local' CHECK (origin IN ('local', 'proxy'));
ALTER TABLE studio_principals ADD COLUMN name_key TEXT;
ALTER TABLE studio_principals ADD COLUMN proxy_user TEXT;
CREATE UNIQUE INDEX studio_principals_by_name_key ON studio_principals (name_key);
CREATE UNIQUE INDEX studio_principals_by_proxy_user ON studio_principals (proxy_user);

UPDATE studio_principals SET origin = 'proxy'
WHERE id IN (SELECT target_id FROM admin_events WHERE actor = 'studio_auth_proxy' AND action = 'studio.principal.created');

ALTER TABLE studio_operator_turns ADD COLUMN cancel_requested_by TEXT;
