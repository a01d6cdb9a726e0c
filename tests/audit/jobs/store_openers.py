"""The child side of the store-creation race in ``test_store.py``, in a module of its own.

A process started with the ``spawn`` method imports the module of its target function. This one imports the
store only, so eight children start in a fraction of a second each; from ``test_store.py`` each imported the
whole runner, scipy and torch (about 2 s alone, about 9 s each when eight start at once beside the suite).
"""

from __future__ import annotations

import time
from pathlib import Path

from dpaudit.auditing.jobs.store import Store


def open_many(directory: str, start: float, count: int, queue) -> None:
    """Wait until ``start`` (a ``time.time()``), then create and register ``count`` stores in ``directory`` in
    order; put the list of failures (type and message) on ``queue``."""
    while time.time() < start:
        time.sleep(0.001)
    failures = []
    for number in range(count):
        try:
            with Store(Path(directory) / f"s{number}.sqlite") as store:
                store.register_audit("x", "t", {}, "v")
        except Exception as exc:  # noqa: BLE001 - every failure is counted
            failures.append(f"{type(exc).__name__}: {exc}")
    queue.put(failures)
