"""Helpers shared by tests."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from typing import Any

import numpy as np

from dpaudit.auditing.jobs.runner import RunOptions, run_audits


def run_documents(configs, options: RunOptions) -> list[dict[str, Any]]:
    """Run ``AuditConfig``s through the runner and return their JSON documents."""
    return [result.to_dict() for result in run_audits([config.job() for config in configs], options)]


def sample_threaded_and_serial(mech, trials: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``mech.sample`` with tiles in two threads (even on one core, so a comparison means something), then in one."""
    from dpaudit.mechanisms import tiles

    previous = tiles.threads()
    try:
        tiles.set_threads(2)
        threaded = mech.sample(trials=trials, seed=seed)
        tiles.set_threads(1)
        serial = mech.sample(trials=trials, seed=seed)
    finally:
        tiles.set_threads(previous)
    return threaded, serial


def count_chunks(path) -> int:
    """The chunks a store holds (0 while it cannot be read yet)."""
    try:
        with sqlite3.connect(path, timeout=5) as connection:
            return connection.execute("SELECT count(*) FROM chunks").fetchone()[0]
    except sqlite3.DatabaseError:
        return 0


def kill_run_after(config, store, *, chunks: int, cwd, poll: float = 0.2) -> int:
    """Start ``dpaudit run config`` in a process, SIGKILL it once ``store`` holds ``chunks`` chunks (or after
    240 s, or when it ends by itself); the chunks it finished."""
    process = subprocess.Popen([sys.executable, "-m", "dpaudit", "run", str(config), "--store", str(store),
                                "--workers", "1", "--quiet"], cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while count_chunks(store) < chunks and time.time() < deadline and process.poll() is None:
        time.sleep(poll)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    return count_chunks(store)
