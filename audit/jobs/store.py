"""SQLite store of audits, finished chunks and results (stdlib ``sqlite3``, WAL mode).

Every finished chunk is committed as soon as it arrives, so a run killed at
any point loses no finished work; a rerun of the same config (same audit
id) reuses them. Scores are stored as zlib-compressed float64 arrays (zlib's
checksum catches a damaged chunk when it is read).

Opening checks the store before anything is written, read-only: the
directory exists, the file is writable, it is an SQLite file with dpaudit's
application id, its schema is not newer than this code, and SQLite's
``quick_check`` passes; each failure has its own message. A new store is
built under a temporary name and linked into place, so processes opening it
at the same moment all see either no file or a complete store.

Concurrent runs of one audit share its chunks through leases
(:meth:`Store.claim`): a run computes a chunk only after it holds the
chunk's lease; a lease lapses when its owner's process is gone (same host)
or it was not renewed for ``LEASE_SECONDS``, so a killed run's chunks return
to the pool.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.core.errors import DPAuditError

__all__ = ["ChunkKey", "LEASE_SECONDS", "MEMORY", "Store", "StoreError", "STORE_SCHEMA", "check_location", "new_owner"]

APPLICATION_ID = 0x44504155  # "DPAU"
STORE_SCHEMA = 1
MEMORY = ":memory:"  # an in-memory store: chunks live as long as the Store object
LEASE_SECONDS = 120.0
ChunkKey = tuple[int, str, str, int]  # (canary index or 0, side "a"/"b", part "cal"/"cert"/"any", chunk)

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
CREATE TABLE IF NOT EXISTS leases (
    audit_id TEXT NOT NULL, canary_index INTEGER NOT NULL, side TEXT NOT NULL, part TEXT NOT NULL,
    chunk INTEGER NOT NULL, owner TEXT NOT NULL, expires REAL NOT NULL,
    PRIMARY KEY (audit_id, canary_index, side, part, chunk));
"""


class StoreError(DPAuditError):
    """The store cannot be used: missing directory, read-only, corrupted, not a store, or newer."""


def new_owner() -> str:
    """A lease owner name: ``host:pid:random`` (the pid lets a same-host reader see that it died)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _owner_alive(owner: str) -> bool | None:
    """Whether the owner's process lives (``None``: another host, unknown)."""
    host, _, rest = owner.partition(":")
    if host != socket.gethostname():
        return None
    try:
        os.kill(int(rest.partition(":")[0]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


def _check_location(path: Path) -> None:
    """Distinct errors for a missing or read-only directory, a directory, an unreadable or read-only file."""
    directory = path.parent
    if not directory.exists():
        raise StoreError(f"store {path}: directory {directory} does not exist; create it or choose another --store")
    if not directory.is_dir():
        raise StoreError(f"store {path}: {directory} is not a directory")
    if path.is_dir():
        raise StoreError(f"store {path} is a directory, not a file; choose another --store")
    if path.exists():
        if not os.access(path, os.R_OK):
            raise StoreError(f"store {path} is not readable (permissions)")
        if not os.access(path, os.W_OK):
            raise StoreError(f"store {path} is read-only (permissions or an immutable file); "
                             f"make it writable or choose another --store")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise StoreError(f"store {path}: directory {directory} is read-only (SQLite writes its journal there)")


def check_location(path: str | Path) -> None:
    """Refuse a store that cannot be used, before any work (``dpaudit run`` checks ``--store`` first).

    Parameters
    ----------
    path : str or pathlib.Path
        The store file (``":memory:"`` is always usable).

    Raises
    ------
    StoreError
        The message of :class:`Store` for the same path: a missing or read-only directory, a directory, an
        unreadable or read-only file, a file that is not a store.
    """
    if str(path) == MEMORY:
        return
    path = Path(path)
    _check_location(path)
    if path.exists() and path.stat().st_size > 0:
        _validate(path)


def _create(path: Path) -> None:
    """Build an empty store under a temporary name and link it into place (atomic; loses no race)."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.creating")
    try:
        connection = sqlite3.connect(temporary)
        try:
            connection.execute(f"PRAGMA application_id={APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version={STORE_SCHEMA}")
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(_SCHEMA)
            connection.commit()
        finally:
            connection.close()
        if path.exists() and path.stat().st_size == 0:
            os.replace(temporary, path)  # an empty file (``touch``) becomes a store
        else:
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process created it first: use theirs
    except OSError as exc:
        raise StoreError(f"cannot create store {path} ({exc.strerror or exc})") from None
    finally:
        temporary.unlink(missing_ok=True)


def _validate(path: Path) -> None:
    """Check an existing store without writing to it."""
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open store {path} ({exc})") from None
    try:
        application_id = connection.execute("PRAGMA application_id").fetchone()[0]
        if application_id != APPLICATION_ID:
            tables = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            raise StoreError(f"{path} is an SQLite file but not a dpaudit store "
                             f"({tables} foreign tables); choose another --store")
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > STORE_SCHEMA:
            raise StoreError(f"{path} was written by a newer dpaudit (store schema {version}, this one "
                             f"reads {STORE_SCHEMA}); upgrade dpaudit")
        problems = [row[0] for row in connection.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise StoreError(f"store {path} is corrupted (SQLite quick_check: {problems[0]}); "
                             f"nothing was written to it; restore it or choose another --store")
    except sqlite3.DatabaseError as exc:
        text = str(exc)
        if "not a database" in text:
            raise StoreError(f"{path} is not an SQLite file, so not a dpaudit store; choose another --store") from None
        raise StoreError(f"store {path} is corrupted ({text}); nothing was written to it") from None
    finally:
        connection.close()


class Store:
    """A dpaudit SQLite store (use as a context manager).

    Parameters
    ----------
    path : str or pathlib.Path
        The store file, created if absent, or ``":memory:"``.

    Raises
    ------
    StoreError
        With a message of its own for each way the store cannot be used.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()  # leases are claimed from joblib's dispatch thread
        self.in_memory = str(path) == MEMORY
        if not self.in_memory:
            _check_location(self.path)
            if not self.path.exists() or self.path.stat().st_size == 0:
                _create(self.path)
            _validate(self.path)
        try:
            self.connection = sqlite3.connect(MEMORY if self.in_memory else self.path, timeout=60,
                                              check_same_thread=False)
            self.connection.execute("PRAGMA synchronous=NORMAL")
            if self.in_memory:
                self.connection.executescript(_SCHEMA)
            elif self.connection.execute("SELECT count(*) FROM sqlite_master WHERE name = 'leases'").fetchone()[0] == 0:
                self.connection.executescript(_SCHEMA)  # a store from before leases: add the table
            self.connection.commit()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path} cannot be used ({exc})") from None

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
        """Store one finished chunk (and drop its lease) and commit at once."""
        array = np.ascontiguousarray(values, dtype=np.float64)
        with self._lock:
            self.connection.execute(
                "INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (audit_id, key[0], key[1], key[2], key[3], int(array.shape[0]), "float64",
                 json.dumps(list(array.shape)), zlib.compress(array.tobytes(), 1), float(seconds)))
            self.connection.execute(
                "DELETE FROM leases WHERE audit_id = ? AND canary_index = ? AND side = ? AND part = ? AND chunk = ?",
                (audit_id, *key))
            self.connection.commit()

    # -- leases ---------------------------------------------------------------
    def claim(self, audit_id: str, key: ChunkKey, owner: str, seconds: float = LEASE_SECONDS) -> bool:
        """Take the lease of an unfinished chunk; ``False`` if it is finished or another live run holds it."""
        if self.in_memory:
            return True
        where = "audit_id = ? AND canary_index = ? AND side = ? AND part = ? AND chunk = ?"
        with self._lock:
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                if self.connection.execute(f"SELECT 1 FROM chunks WHERE {where}", (audit_id, *key)).fetchone():
                    return False
                held = self.connection.execute(f"SELECT owner, expires FROM leases WHERE {where}",
                                               (audit_id, *key)).fetchone()
                if held is not None and held[0] != owner and _lease_live(*held):
                    return False
                self.connection.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?, ?, ?, ?)",
                                        (audit_id, *key, owner, time.time() + seconds))
                return True
            finally:
                self.connection.commit()

    def renew(self, owner: str, seconds: float = LEASE_SECONDS) -> None:
        """Extend every lease ``owner`` holds (called as its chunks finish)."""
        if self.in_memory:
            return
        with self._lock:
            self.connection.execute("UPDATE leases SET expires = ? WHERE owner = ?", (time.time() + seconds, owner))
            self.connection.commit()

    def release(self, owner: str) -> None:
        """Give back every lease ``owner`` still holds."""
        if self.in_memory:
            return
        with self._lock:
            self.connection.execute("DELETE FROM leases WHERE owner = ?", (owner,))
            self.connection.commit()

    def get_chunks(self, audit_id: str, canary_index: int, side: str, part: str) -> np.ndarray:
        """The chunks of one (index, side, part), concatenated in chunk order."""
        rows = self.connection.execute(
            "SELECT shape, data FROM chunks WHERE audit_id = ? AND canary_index = ? AND side = ? AND part = ? "
            "ORDER BY chunk", (audit_id, canary_index, side, part)).fetchall()
        arrays = [self._decode(shape, data, (canary_index, side, part, number))
                  for number, (shape, data) in enumerate(rows)]
        return np.concatenate(arrays) if arrays else np.empty(0)

    def get_chunk(self, audit_id: str, key: ChunkKey) -> np.ndarray:
        """One stored chunk; a StoreError when it is not in the store."""
        row = self.connection.execute(
            "SELECT shape, data FROM chunks WHERE audit_id = ? AND canary_index = ? AND side = ? AND part = ? "
            "AND chunk = ?", (audit_id, *key)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: chunk {key} of audit {audit_id} is not stored")
        return self._decode(row[0], row[1], key)

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


def _lease_live(owner: str, expires: float) -> bool:
    """A lease holds while its owner's process lives (same host), else until it expires."""
    alive = _owner_alive(owner)
    return alive if alive is not None else expires > time.time()
