"""The SQLite schema as numbered migrations; ``PRAGMA user_version`` is the schema version."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

MIGRATIONS: list[str] = [
    # 1: sessions, messages, events, execution log, drafts. Append-only tables are
    # clustered on their keys (one B-tree each), and a generation's streamed chunks are
    # packed into one row, so a turn's transaction writes a handful of rows, not dozens.
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
    CREATE TABLE events_packed (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        topic TEXT NOT NULL,
        type TEXT NOT NULL,
        record TEXT NOT NULL,
        count INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    -- one row per event, in order: a packed row holds `count` consecutive events as a
    -- JSON array (record) starting at `seq` (version 1: the streamed chunks of one
    -- generation; version 2 packs more, see below)
    CREATE VIEW events (session_id, seq, topic, type, record) AS
        SELECT session_id, seq, topic, type, record FROM events_packed WHERE count = 1
        UNION ALL
        SELECT p.session_id, p.seq + j.key, p.topic, p.type, j.value
        FROM events_packed AS p, json_each(p.record) AS j WHERE p.count > 1;
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
    # 2: a turn's consecutive events are packed by kind, the streamed ones (sse/start,
    # chunks, end) in one row and the others (the message, its step, ...) in another, so
    # a turn writes two event rows. Rows of version 1 stay as they are: a packed row
    # (count > 1) now names its topic and type in each element, which the view reads.
    # The table becomes a rowid table (rows appended in order, an index on the key): a
    # turn's packed rows of a few KB then fit in their page instead of overflowing, and
    # a commit writes fewer pages.
    """
    DROP VIEW events;
    CREATE TABLE events_packed_2 (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        topic TEXT NOT NULL,
        type TEXT NOT NULL,
        record TEXT NOT NULL,
        count INTEGER NOT NULL DEFAULT 1
    );
    INSERT INTO events_packed_2 (session_id, seq, topic, type, record, count)
        SELECT session_id, seq, topic, type, record, count FROM events_packed
        ORDER BY session_id, seq;
    DROP TABLE events_packed;
    ALTER TABLE events_packed_2 RENAME TO events_packed;
    CREATE UNIQUE INDEX events_packed_key ON events_packed (session_id, seq);
    CREATE VIEW events (session_id, seq, topic, type, record) AS
        SELECT session_id, seq, topic, type, record FROM events_packed WHERE count = 1
        UNION ALL
        SELECT p.session_id, p.seq + j.key, json_extract(j.value, '$.topic'),
            json_extract(j.value, '$.type'), j.value
        FROM events_packed AS p, json_each(p.record) AS j WHERE p.count > 1;
    """,
    # 3: batches (`rolecall batch`): the plan of each (world document, --vary axes,
    # --runs), and one row per run naming its session and, once it ended, its result
    # row. A deleted session leaves its run without a session (run again on --resume).
    """
    CREATE TABLE batches (
        name TEXT PRIMARY KEY,
        plan_json TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE batch_runs (
        batch TEXT NOT NULL REFERENCES batches(name) ON DELETE CASCADE,
        run INTEGER NOT NULL,
        session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
        result_json TEXT,
        PRIMARY KEY (batch, run)
    ) WITHOUT ROWID;
    CREATE INDEX batch_runs_session ON batch_runs (session_id);
    """,
    # 4: full-text search over the messages (``rolecall sessions list --search``): an
    # FTS5 table of each message's sender and content, filled by a trigger as messages
    # are inserted (existing ones copied here) and emptied with its session.
    """
    CREATE VIRTUAL TABLE messages_fts USING fts5(
        content, sender UNINDEXED, session_id UNINDEXED, tokenize = 'unicode61'
    );
    INSERT INTO messages_fts (content, sender, session_id)
        SELECT json_extract(body, '$.content'), sender, session_id FROM messages;
    CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (content, sender, session_id)
        VALUES (json_extract(new.body, '$.content'), new.sender, new.session_id);
    END;
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON sessions BEGIN
        DELETE FROM messages_fts WHERE session_id = old.id;
    END;
    """,
    # 5: a generation's streamed chunks in one compact row (type `chunks`): the message
    # id and sender once, then `[ts, delta, output_tokens]` per chunk, so a long reply
    # costs about its text, not a whole event object per word; the `events` view still
    # gives one full record per chunk. Rows written before keep their form.
    """
    DROP VIEW events;
    CREATE VIEW events (session_id, seq, topic, type, record) AS
        SELECT session_id, seq, topic, type, record FROM events_packed WHERE count = 1
        UNION ALL
        SELECT p.session_id, p.seq + j.key, json_extract(j.value, '$.topic'),
            json_extract(j.value, '$.type'), j.value
        FROM events_packed AS p, json_each(p.record) AS j
        WHERE p.count > 1 AND p.type != 'chunks'
        UNION ALL
        SELECT p.session_id, p.seq + j.key, 'sse', 'chunk',
            json_object('topic', 'sse', 'type', 'chunk', 'seq', p.seq + j.key,
                'session_id', p.session_id, 'ts', json_extract(j.value, '$[0]'),
                'message_id', m.value, 'sender', s.value,
                'delta', json_extract(j.value, '$[1]'),
                'output_tokens', json_extract(j.value, '$[2]'))
        -- CROSS JOIN keeps this nesting: the row's message id and sender are read once
        -- per row, not once per chunk (each read parses the whole record)
        FROM events_packed AS p
            CROSS JOIN json_each(p.record, '$.message_id') AS m
            CROSS JOIN json_each(p.record, '$.sender') AS s
            CROSS JOIN json_each(p.record, '$.chunks') AS j
        WHERE p.count > 1 AND p.type = 'chunks';
    """,
    # 6: the messages are indexed for search in batches, not in each turn's transaction
    # (rolecall.storage.fts): how many of each session's messages the index holds; the
    # trigger that indexed every message as it was inserted is dropped.
    """
    CREATE TABLE fts_progress (
        session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        indexed INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO fts_progress (session_id, indexed)
        SELECT session_id, MAX(idx) + 1 FROM messages GROUP BY session_id;
    DROP TRIGGER messages_fts_insert;
    """,
    # 7: the index of the execution log by step is dropped: no query reads it (a
    # session's log is read whole, by its key), and each turn's insert wrote one of its
    # pages, scattered by step id (about 1.2 of the 11 pages a turn's commit wrote).
    """
    DROP INDEX execution_log_step;
    """,
    # 8: a session's world document moves to a table of its own. Each turn updates the
    # session's row (its state); a world of a few KB (personas, a flow) made that row
    # overflow its page, and every update that changed the row's size freed and rewrote
    # its overflow pages (3 pages an update for a 5 KB world; with a 12 KB world, 0.2 to
    # 0.4 more pages a turn in a scripted session). The column `sessions.world_json`
    # stays (SQLite before 3.35 cannot drop a column), empty.
    """
    CREATE TABLE session_worlds (
        session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        world_json TEXT NOT NULL
    );
    INSERT INTO session_worlds (session_id, world_json) SELECT id, world_json FROM sessions;
    UPDATE sessions SET world_json = '';
    """,
    # 9: scores given to stored sessions after the fact (``rolecall score``): one row per
    # scoring, numbered per session, with its judge, model and time; the session's own
    # rows (its transcript) are never changed by one. Deleted with the session.
    """
    CREATE TABLE scores (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        number INTEGER NOT NULL,
        judge TEXT NOT NULL,
        model TEXT NOT NULL,
        scored_at TEXT NOT NULL,
        scores_json TEXT NOT NULL,
        comment TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (session_id, number)
    ) WITHOUT ROWID;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

# a new session's world document (schema 8: not in its row of ``sessions``)
WORLD_INSERT = "INSERT INTO session_worlds (session_id, world_json) VALUES (?, ?)"

# what a store at SCHEMA_VERSION must hold (checked when it is opened)
EXPECTED_OBJECTS = frozenset(
    {
        "sessions",
        "messages",
        "events_packed",
        "events_packed_key",
        "events",
        "execution_log",
        "drafts",
        "batches",
        "batch_runs",
        "batch_runs_session",
        "fts_progress",
        "session_worlds",
        "scores",
    }
)


def statements(script: str) -> Iterator[str]:
    """The statements of a migration, one at a time (comments may hold semicolons).

    A migration runs statement by statement inside a transaction the store opened
    (``executescript`` would commit that transaction first).
    """
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()  # sqlite reports whatever is wrong with it
