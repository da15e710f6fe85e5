"""The ingest bookkeeping: every record each source file contributed, in SQLite.

Chroma holds what the question side needs; the catalog remembers, per source file, which
records it gave, so that a paper seen in two files is merged across runs, and `--prune` can
remove exactly what a source no longer has (and nothing that came from elsewhere).
It also lists the papers an ingest decided to remove from the store until they are gone,
so that a run killed half-way through the removals is finished by the next one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from rag.corpus import Paper
from rag.faults import checkpoint

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    source_file TEXT NOT NULL,
    record_key TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (source_file, record_key)
);
CREATE TABLE IF NOT EXISTS removals (paper_id TEXT PRIMARY KEY);
"""


def source_file(paper: Paper) -> str:
    return paper.source.rsplit(":", 1)[0]


def record_key(paper: Paper) -> str:
    """A record's identity within its file: its own id, else its abstract."""
    return f"id:{paper.own_id}" if paper.own_id else f"text:{paper.key}"


class Catalog:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def records(self) -> list[Paper]:
        rows = self._db.execute("SELECT data FROM records ORDER BY source_file, record_key")
        return [Paper.from_dict(json.loads(data)) for (data,) in rows]

    def files(self) -> set[str]:
        return {f for (f,) in self._db.execute("SELECT DISTINCT source_file FROM records")}

    def keys(self, file: str) -> set[str]:
        rows = self._db.execute("SELECT record_key FROM records WHERE source_file = ?", (file,))
        return {k for (k,) in rows}

    def begin(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self._db.execute("COMMIT")

    def rollback(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    def upsert(self, records: Iterable[Paper]) -> None:
        rows = []
        for rec in records:
            data = rec.to_dict() | {"own_id": rec.own_id}
            rows.append((source_file(rec), record_key(rec), json.dumps(data, ensure_ascii=False)))
        self._db.executemany(
            "INSERT INTO records (source_file, record_key, data) VALUES (?, ?, ?) "
            "ON CONFLICT (source_file, record_key) DO UPDATE SET data = excluded.data",
            rows,
        )
        checkpoint("catalog.upsert")

    def delete(self, file: str, keys: Iterable[str] | None = None) -> int:
        if keys is None:
            cur = self._db.execute("DELETE FROM records WHERE source_file = ?", (file,))
            return cur.rowcount
        count = 0
        for key in keys:
            cur = self._db.execute(
                "DELETE FROM records WHERE source_file = ? AND record_key = ?", (file, key)
            )
            count += cur.rowcount
        return count

    def add_removals(self, paper_ids: Iterable[str]) -> None:
        self._db.executemany(
            "INSERT OR IGNORE INTO removals (paper_id) VALUES (?)", ((p,) for p in paper_ids)
        )

    def removals(self) -> set[str]:
        return {p for (p,) in self._db.execute("SELECT paper_id FROM removals")}

    def clear_removals(self) -> None:
        self._db.execute("DELETE FROM removals")
