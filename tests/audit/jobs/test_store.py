"""Store integrity and concurrency: each fault its own message and an untouched file; leases; races."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dpaudit.auditing.jobs.config import load_configs
from dpaudit.auditing.jobs.runner import RunOptions
from dpaudit.auditing.jobs.store import Store, StoreError
from dpaudit.cli import main
from tests.audit.conftest import SMALL
from tests.audit.jobs.store_openers import open_many
from tests.helpers import run_documents

REPO = Path(__file__).resolve().parents[3]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli_error(capsys, argv) -> str:
    """Run the CLI; it must exit 2 with exactly one line on stderr, which is returned."""
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def filled_store(write_config, tmp_path):
    """A store holding one finished audit of SMALL (several chunks and a result), checkpointed."""
    config = write_config(SMALL)
    path = tmp_path / "filled.sqlite"
    run_documents(load_configs([config]), RunOptions(store=str(path), workers=1, progress=False))
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return config, path


def _chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def test_a_damaged_page_is_refused_and_the_file_left_unchanged(filled_store, write_config, capsys):
    config, path = filled_store
    size = path.stat().st_size
    page = 4096
    with path.open("r+b") as handle:  # random bytes over a whole page in the middle
        handle.seek((size // page // 2) * page)
        handle.write(np.random.default_rng(0).bytes(page))
    before = digest(path)
    same = cli_error(capsys, ["run", str(config), "--store", str(path), "--quiet"])
    other = write_config(SMALL.replace("sigma = 1.0", "sigma = 2.5"), "other.toml")
    new = cli_error(capsys, ["run", str(other), "--store", str(path), "--quiet"])
    for line in (same, new):
        assert "is corrupted" in line and str(path) in line
    assert digest(path) == before


def test_a_damaged_chunk_is_named_on_read(filled_store):
    _, path = filled_store
    with sqlite3.connect(path) as connection:
        audit_id = connection.execute("SELECT audit_id FROM chunks LIMIT 1").fetchone()[0]
        connection.execute("UPDATE chunks SET data = zeroblob(64) WHERE chunk = 0 AND side = 'a' AND part = 'cert'")
    with Store(path) as store, pytest.raises(StoreError, match=r"chunk \(1, 'a', 'cert', 0\) is corrupted"):
        list(store.iter_chunks(audit_id, 1, "a", "cert"))


def test_each_fault_has_its_own_message(filled_store, tmp_path, capsys):
    config, good = filled_store
    cases = {}
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database " * 300)
    cases[garbage] = "is not an SQLite file"
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE customers (id INTEGER)")
    cases[foreign] = "is an SQLite file but not a dpaudit store"
    newer = tmp_path / "newer.sqlite"
    shutil.copy(good, newer)
    with sqlite3.connect(newer) as connection:
        connection.execute("PRAGMA user_version = 99")
    cases[newer] = "was written by a newer dpaudit (store schema 99"
    messages = set()
    for path, expected in cases.items():
        before = digest(path)
        line = cli_error(capsys, ["run", str(config), "--store", str(path), "--quiet"])
        assert expected in line, line
        assert digest(path) == before, path
        messages.add(line.replace(str(path), "PATH"))
    missing = cli_error(capsys, ["run", str(config), "--store", str(tmp_path / "nowhere" / "s.sqlite"), "--quiet"])
    assert "directory" in missing and "does not exist" in missing
    directory = cli_error(capsys, ["run", str(config), "--store", str(tmp_path), "--quiet"])
    assert "is a directory" in directory
    assert not (tmp_path / "nowhere").exists()
    messages |= {missing, directory}
    assert len(messages) == 5  # distinct


def test_read_only_store_and_directory(filled_store, tmp_path, capsys):
    config, good = filled_store
    locked = tmp_path / "locked"
    locked.mkdir()
    store = locked / "s.sqlite"
    shutil.copy(good, store)
    if not _chattr("+i", store):
        pytest.skip("chattr +i is not available here (an immutable file is how a read-only store is made as root)")
    try:
        before = digest(store)
        line = cli_error(capsys, ["run", str(config), "--store", str(store), "--quiet"])
        assert "is read-only" in line and "immutable" in line
        assert digest(store) == before
    finally:
        _chattr("-i", store)
    if not _chattr("+i", locked):
        pytest.skip("chattr +i on a directory is not available here")
    try:
        line = cli_error(capsys, ["run", str(config), "--store", str(locked / "new.sqlite"), "--quiet"])
        assert f"directory {locked} is read-only" in line
    finally:
        _chattr("-i", locked)


def test_eight_processes_opening_new_stores_never_fail(tmp_path):
    # 8 processes open the same 50 new stores in the same order, starting together
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    start = time.time() + 3.0
    processes = [context.Process(target=open_many, args=(str(tmp_path), start, 50, queue)) for _ in range(8)]
    for process in processes:
        process.start()
    failures = [failure for _ in processes for failure in queue.get(timeout=120)]
    for process in processes:
        process.join(timeout=60)
    assert failures == []
    assert len(list(tmp_path.glob("s*.sqlite"))) == 50 and not list(tmp_path.glob(".*creating"))


def test_leases_of_live_dead_and_lapsed_owners(tmp_path):
    key = (1, "a", "cert", 0)
    with Store(tmp_path / "s.sqlite") as store:
        host = socket.gethostname()
        me = f"{host}:{os.getpid()}:mine"
        assert store.claim("audit", key, me)
        assert store.claim("audit", key, me)  # the owner may claim again
        parent = f"{host}:{os.getppid()}:other"  # a live process on this host holds it
        assert not store.claim("audit", key, parent)
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout.strip()
        store.connection.execute("UPDATE leases SET owner = ?", (f"{host}:{dead}:gone",))
        store.connection.commit()
        assert store.claim("audit", key, parent)  # a dead owner's lease returns to the pool at once
        store.connection.execute("UPDATE leases SET owner = 'elsewhere:1:x', expires = ?", (time.time() + 60,))
        store.connection.commit()
        assert not store.claim("audit", key, me)  # another host's lease holds until it expires
        store.connection.execute("UPDATE leases SET expires = ?", (time.time() - 1,))
        store.connection.commit()
        assert store.claim("audit", key, me)
        store.put_chunk("audit", key, np.zeros(3), 0.0)
        assert not store.claim("audit", key, parent)  # finished chunks are never claimed
        assert store.connection.execute("SELECT count(*) FROM leases").fetchone()[0] == 0


CONCURRENT = SMALL.replace("trials = 3000", "trials = 60000").replace("chunk_size = 700", "chunk_size = 3000")


def test_two_concurrent_runs_compute_each_chunk_once(write_config, tmp_path):
    config = write_config(CONCURRENT)
    store = tmp_path / "shared.sqlite"
    command = [sys.executable, "-m", "dpaudit", "run", str(config), "--store", str(store), "--workers", "1",
               "--quiet", "--json"]
    runs = [subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    documents = [json.loads(out) for out, _ in outputs]
    total = 2 * 2 * (2 + 18)  # 2 positions x 2 sides x (6000 calibration + 54000 certification) / 3000
    computed = [doc["timings"]["chunks_computed"] for doc in documents]
    assert sum(computed) == total, computed
    single = run_documents(load_configs([config]), RunOptions(store=str(tmp_path / "one.sqlite"), workers=1,
                                                             progress=False))[0]
    for document in documents:
        assert document["per_index"] == json.loads(json.dumps(single["per_index"]))
