"""SQLite store of audits, finished chunks and results (stdlib ``sqlite3``, WAL mode).

Every finished chunk is committed as soon as it arrives, so a run killed at
any point loses no finished work; a rerun of the same config (same audit
id) reuses them. Scores are stored as zlib-compressed float64 arrays. Files
that are not dpaudit stores are refused with a clear error.
"""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.mechanisms.errors import DPAuditError

__all__ = ["ChunkKey", "MEMORY", "Store", "StoreError", "STORE_SCHEMA"]

APPLICATION_ID = 0x44504155  # "DPAU"
STORE_SCHEMA = 1
MEMORY = ":memory:"  # an in-memory store: chunks live as long as the Store object
ChunkKey = tuple[int, str, str, int]  # (canary index or 0, side "a"/"b", part "cal"/"cert", chunk)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audits (
    audit_id TEXT PRIMARY KEY, title TEXT, config TEXT NOT NULL, code_version TEXT NOT NULL,
    created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    audit_id TEXT NOT NULL, canary_index INTEGER NOT NULL, side TEXT NOT NULL, part TEXT NOT NULL,
    chunk INTEGER NOT NULL, trials INTEGER NOT NULL, dtype TEXT NOT NULL, shape TEXT NOT NULL,
    data BLOB NOT NULL, seconds REAL NOT NULL,
    PRIMARY KEY (audit_id, canary_index, side, part, chunk));
CREATE TABLE IF NOT EXISTS results (
    audit_id TEXT PRIMARY KEY, schema_version INTEGER NOT NULL, document TEXT NOT NULL,
    finished REAL NOT NULL);
"""


class StoreError(DPAuditError):
    """The store file is missing, corrupted, or not a dpaudit store."""


class Store:
    """A dpaudit SQLite store (use as a context manager)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        in_memory = str(path) == MEMORY
        if not in_memory and self.path.exists() and self.path.is_dir():
            raise StoreError(f"store {self.path} is a directory, not a file")
        existed = not in_memory and self.path.exists() and self.path.stat().st_size > 0
        try:
            self.connection = sqlite3.connect(MEMORY if in_memory else self.path, timeout=60)
            application_id = self.connection.execute("PRAGMA application_id").fetchone()[0]
            if existed and application_id != APPLICATION_ID:
                tables = self.connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                raise StoreError(f"{self.path} is an SQLite file but not a dpaudit store "
                                 f"({tables} foreign tables); choose another --store")
            self.connection.execute("PRAGMA journal_mode=WAL")
            self.connection.execute("PRAGMA synchronous=NORMAL")
            if not existed:
                self.connection.execute(f"PRAGMA application_id={APPLICATION_ID}")
                self.connection.execute(f"PRAGMA user_version={STORE_SCHEMA}")
            version = self.connection.execute("PRAGMA user_version").fetchone()[0]
            if version > STORE_SCHEMA:
                raise StoreError(f"{self.path} was written by a newer dpaudit (store schema {version})")
            self.connection.executescript(_SCHEMA)
            self.connection.commit()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is corrupted or not an SQLite file ({exc})") from None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        self.connection.close()

    # -- audits ---------------------------------------------------------------
    def register_audit(self, audit_id: str, title: str, config: dict[str, Any], code_version: str) -> None:
        """Record an audit (idempotent: a rerun keeps the first row)."""
        self.connection.execute(
            "INSERT OR IGNORE INTO audits (audit_id, title, config, code_version, created) VALUES (?, ?, ?, ?, ?)",
            (audit_id, title, json.dumps(config, sort_keys=True), code_version, time.time()))
        self.connection.commit()

    # -- chunks ---------------------------------------------------------------
    def finished_chunks(self, audit_id: str) -> set[ChunkKey]:
        rows = self.connection.execute(
            "SELECT canary_index, side, part, chunk FROM chunks WHERE audit_id = ?", (audit_id,))
        return {(int(i), s, p, int(c)) for i, s, p, c in rows}

    def put_chunk(self, audit_id: str, key: ChunkKey, values: np.ndarray, seconds: float) -> None:
        """Store one finished chunk and commit at once."""
        array = np.ascontiguousarray(values, dtype=np.float64)
        self.connection.execute(
            "INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (audit_id, key[0], key[1], key[2], key[3], int(array.shape[0]), "float64",
             json.dumps(list(array.shape)), zlib.compress(array.tobytes(), 1), float(seconds)))
        self.connection.commit()

    def get_chunks(self, audit_id: str, canary_index: int, side: str, part: str) -> np.ndarray:
        """The chunks of one (index, side, part), concatenated in chunk order."""
        rows = self.connection.execute(
            "SELECT shape, data FROM chunks WHERE audit_id = ? AND canary_index = ? AND side = ? AND part = ? "
            "ORDER BY chunk", (audit_id, canary_index, side, part)).fetchall()
        arrays = [self._decode(shape, data, (canary_index, side, part, number))
                  for number, (shape, data) in enumerate(rows)]
        return np.concatenate(arrays) if arrays else np.empty(0)

    def iter_chunks(self, audit_id: str, canary_index: int, side: str, part: str) -> Iterator[np.ndarray]:
        """The chunks of one (index, side, part) in chunk order, one array at a time (bounded memory)."""
        numbers = [row[0] for row in self.connection.execute(
            "SELECT chunk FROM chunks WHERE audit_id = ? AND canary_index = ? AND side = ? AND part = ? "
            "ORDER BY chunk", (audit_id, canary_index, side, part))]
        for number in numbers:
            row = self.connection.execute(
                "SELECT shape, data FROM chunks WHERE audit_id = ? AND canary_index = ? AND side = ? AND part = ? "
                "AND chunk = ?", (audit_id, canary_index, side, part, number)).fetchone()
            yield self._decode(row[0], row[1], (canary_index, side, part, number))

    def _decode(self, shape: str, data: bytes, key: ChunkKey) -> np.ndarray:
        try:
            return np.frombuffer(zlib.decompress(data), dtype=np.float64).reshape(json.loads(shape))
        except (zlib.error, ValueError) as exc:
            raise StoreError(f"{self.path}: chunk {key} is corrupted ({exc}); "
                             f"delete the store or use another --store") from None

    def chunk_seconds(self, audit_id: str) -> float:
        row = self.connection.execute("SELECT coalesce(sum(seconds), 0) FROM chunks WHERE audit_id = ?",
                                      (audit_id,)).fetchone()
        return float(row[0])

    # -- results --------------------------------------------------------------
    def put_result(self, audit_id: str, document: dict[str, Any]) -> None:
        self.connection.execute(
            "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)",
            (audit_id, int(document.get("schema_version", 1)), json.dumps(document), time.time()))
        self.connection.commit()

    def result_ids(self, prefix: str = "") -> list[str]:
        """Ids of the stored results that start with ``prefix``, oldest first."""
        rows = self.connection.execute(
            "SELECT audit_id FROM results WHERE substr(audit_id, 1, ?) = ? ORDER BY finished",
            (len(prefix), prefix))
        return [row[0] for row in rows]

    def get_result(self, audit_id: str) -> dict[str, Any]:
        row = self.connection.execute("SELECT document FROM results WHERE audit_id = ?", (audit_id,)).fetchone()
        if row is None:
            known = [r[0] for r in self.connection.execute("SELECT audit_id FROM results ORDER BY finished")]
            raise StoreError(f"no result {audit_id!r} in {self.path}; stored results: {', '.join(known) or 'none'}")
        return json.loads(row[0])
