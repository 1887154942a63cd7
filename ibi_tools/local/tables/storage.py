"""The SQLite file the tables live in: its schema, its connections, its write transactions.

Every write is one SQLite transaction begun ``IMMEDIATE`` (:class:`Transaction`): it reads
the item, checks the condition and writes, holding the database's write lock throughout, so
conditional writes are atomic across every worker process and thread (WAL; readers never
wait). The file is ``synchronous=NORMAL``: a crash of any process loses nothing; a power cut
may lose the last transactions (as dynalite's LevelDB, which did not sync either).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from types import TracebackType

from ibi_tools.local.stores import PRIVATE_FILE

SCHEMA = """
CREATE TABLE IF NOT EXISTS tables (name TEXT PRIMARY KEY, schema TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    tbl TEXT NOT NULL, pk TEXT NOT NULL, sk TEXT NOT NULL, item TEXT NOT NULL,
    expires REAL,  -- the TTL attribute's value, when the table has a TTL and it is a number
    PRIMARY KEY (tbl, pk, sk)
) WITHOUT ROWID;
-- a global secondary index's entries: the item at (pk, sk) under the index key (ipk, isk)
CREATE TABLE IF NOT EXISTS index_entries (
    tbl TEXT NOT NULL, idx TEXT NOT NULL, ipk TEXT NOT NULL, isk TEXT NOT NULL,
    pk TEXT NOT NULL, sk TEXT NOT NULL,
    PRIMARY KEY (tbl, idx, ipk, isk, pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS index_entries_item ON index_entries (tbl, pk, sk);
"""
EXPIRY_INDEX = (
    "CREATE INDEX IF NOT EXISTS items_expiry ON items (tbl, expires) WHERE expires IS NOT NULL"
)


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the file, in autocommit (transactions are begun explicitly)."""
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def prepare(path: Path) -> None:
    """Make the file (0600) if missing, in WAL mode, with the schema; bring a file made before
    TTL was kept up to date (its ``expires`` column)."""
    if not path.exists():  # (closing any descriptor of an open database would
        # drop this process's locks on it: only a file no connection has open yet)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE))
    connection = connect(path)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.executescript(SCHEMA)
        columns = {row[1] for row in connection.execute("PRAGMA table_info(items)")}
        if "expires" not in columns:  # a file made before TTL was kept: its column
            connection.execute("ALTER TABLE items ADD COLUMN expires REAL")
            for name, schema in connection.execute("SELECT name, schema FROM tables"):
                note_expiry(connection, name, json.loads(schema).get("TimeToLive"))
        connection.execute(EXPIRY_INDEX)
    finally:
        connection.close()


def checkpoint(path: Path) -> None:
    """Everything the write-ahead log holds, written into the file itself."""
    connection = connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


class Transaction:
    """``with Transaction(connection):`` one write transaction, begun ``IMMEDIATE`` (the
    database's write lock taken at once), committed when the block ends and rolled back if it
    raises."""

    __slots__ = ("connection",)

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def __enter__(self) -> sqlite3.Connection:
        self.connection.execute("BEGIN IMMEDIATE")
        return self.connection

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.connection.execute("COMMIT" if kind is None else "ROLLBACK")


def note_expiry(connection: sqlite3.Connection, table: str, ttl: str | None) -> None:
    """Set the ``expires`` column of every item of ``table`` from its TTL attribute ``ttl``
    (None: the table has no TTL, nothing expires)."""
    if ttl is None:
        connection.execute("UPDATE items SET expires = NULL WHERE tbl = ?", (table,))
        return
    path = '$."' + ttl.replace('"', '\\"') + '".N'
    connection.execute(
        "UPDATE items SET expires = CAST(json_extract(item, ?) AS REAL) WHERE tbl = ?",
        (path, table),
    )
