-- An outbox as the edge of 9afaa28 (2026-12-02) left it: its schema as
-- `sqlite3 .schema` prints it (user_version 0: no owner, no token_device
-- column), with device devF's writes, one sent and two queued after the
-- gateway removed devF (refused token), and one queued with no
-- MEMPALACE_ORIGIN_DEVICE set.
CREATE TABLE ops(
  local_seq       INTEGER PRIMARY KEY AUTOINCREMENT,
  op_id           TEXT NOT NULL UNIQUE,
  dedupe_key      TEXT NOT NULL,
  origin_device   TEXT NOT NULL DEFAULT '',
  origin_label    TEXT NOT NULL DEFAULT '',
  tool_name       TEXT NOT NULL,
  payload_json    TEXT NOT NULL,
  wing            TEXT NOT NULL DEFAULT '',
  lane            TEXT NOT NULL DEFAULT 'palace',
  ordinal         INTEGER NOT NULL DEFAULT 0,
  state           TEXT NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0,
  refusals        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  flushed_at      INTEGER,
  error_json      TEXT,
  result_json     TEXT,
  maybe_applied   INTEGER NOT NULL DEFAULT 0,
  resend          INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX ops_dedupe_active ON ops(dedupe_key) WHERE state IN ('queued','inflight');
CREATE INDEX ops_pending ON ops(lane, local_seq) WHERE state <> 'done';
CREATE INDEX ops_settled ON ops(flushed_at) WHERE state = 'done';
CREATE TABLE op_keys(
  key       TEXT NOT NULL,
  local_seq INTEGER NOT NULL,
  PRIMARY KEY(key, local_seq)
) WITHOUT ROWID;
CREATE INDEX op_keys_seq ON op_keys(local_seq);
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE tombstones(
  kind       TEXT NOT NULL,
  key        TEXT NOT NULL,
  agent      TEXT NOT NULL DEFAULT '',
  stamp      TEXT NOT NULL DEFAULT '',
  text       TEXT NOT NULL DEFAULT '',
  op_id      TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  PRIMARY KEY(kind, key)
) WITHOUT ROWID;
INSERT INTO ops(local_seq, op_id, dedupe_key, origin_device, origin_label, tool_name, payload_json, wing, state, created_at, flushed_at, result_json) VALUES
  (1, '1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f801', 'content:f1', 'devF', 'labF', 'mempalace_add_drawer',
   '{"wing":"shared","room":"f","content":"F drawer one sent","added_by":"claude/labF/devF"}', 'shared', 'done', 1796618981167, 1796618982000, '{"success":true}');
INSERT INTO ops(local_seq, op_id, dedupe_key, origin_device, origin_label, tool_name, payload_json, wing, state, attempts, refusals, created_at, error_json) VALUES
  (2, '2a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f802', 'content:f2', 'devF', 'labF', 'mempalace_add_drawer',
   '{"wing":"shared","room":"f","content":"F drawer two after removal","added_by":"claude/labF/devF"}', 'shared', 'queued', 1, 1, 1796618990000,
   '{"kind":"unauthorized","message":"HTTP 401: the primary refused the token"}'),
  (3, '3a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f803', 'content:f3', 'devF', 'labF', 'mempalace_add_drawer',
   '{"wing":"shared","room":"f","content":"F drawer three after removal","added_by":"claude/labF/devF"}', 'shared', 'queued', 1, 1, 1796618991000,
   '{"kind":"unauthorized","message":"HTTP 401: the primary refused the token"}'),
  (4, '4a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f804', 'content:f4', '', 'labF', 'mempalace_add_drawer',
   '{"wing":"shared","room":"f","content":"a drawer queued with no origin device"}', 'shared', 'queued', 0, 0, 1796618992000, NULL);
