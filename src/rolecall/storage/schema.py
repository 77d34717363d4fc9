"""The SQLite schema as numbered migrations; ``PRAGMA user_version`` is the schema version."""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: sessions, messages, events, execution log, drafts (append-only tables are
    # clustered on their keys: one B-tree each, so a turn's inserts stay cheap)
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        world_name TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        world_json TEXT NOT NULL,
        world_source TEXT,
        model_override TEXT,
        state TEXT NOT NULL,
        stop_reason TEXT,
        state_json TEXT NOT NULL,
        last_seq INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        id TEXT NOT NULL,
        sender TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, idx)
    ) WITHOUT ROWID;
    CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        topic TEXT NOT NULL,
        type TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE execution_log (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        execution_order INTEGER NOT NULL,
        step_id TEXT NOT NULL,
        speaker TEXT NOT NULL,
        message_id TEXT,
        loop_iteration INTEGER NOT NULL,
        result TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        PRIMARY KEY (session_id, execution_order)
    ) WITHOUT ROWID;
    CREATE INDEX execution_log_step ON execution_log (session_id, step_id);
    CREATE TABLE drafts (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, idx)
    ) WITHOUT ROWID;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
