"""Test-suite configuration: pytester for the plugin tests, and one thread per worker for numerical libraries."""

import json
import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

#: Seconds per test file, from a whole run (``benchmarks/suite_order.py`` writes it): the order files are handed out
FILE_SECONDS: dict[str, float] = json.loads((Path(__file__).parent / "file_seconds.json").read_text(encoding="utf-8"))
#: The weight of a file the record does not hold (new files are mostly short)
UNKNOWN_SECONDS = 1.0

#: The thread pools of OpenMP (torch), OpenBLAS (numpy, scipy) and MKL read these when they load
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_configure(config):
    """With the test files spread over every core (pytest-xdist), each worker runs its numerical libraries on
    one thread: the workers already fill the cores, and a second thread per worker only competes with the
    other worker (on 2 cores the suite took about a tenth longer). Set here, in the process that starts the
    workers, before they load numpy or torch. A user's own ``OMP_NUM_THREADS`` is kept and given to the other
    two as well (torch reads ``MKL_NUM_THREADS`` before it), a value set for one of those is kept, and ``-n 0``
    changes nothing."""
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, int) and workers > 1 and "PYTEST_XDIST_WORKER" not in os.environ:
        threads = os.environ.setdefault("OMP_NUM_THREADS", "1")
        for name in THREAD_VARIABLES[1:]:
            os.environ.setdefault(name, threads)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """On a pytest-xdist worker, the test files longest first (``FILE_SECONDS``), each file's tests in the order
    pytest-randomly gave them. Each file goes whole to one worker (``--dist loadfile``) in the order collected
    (``--no-loadscope-reorder``); a long file handed out last would run alone while the other worker idles,
    so the longest go first and the idle tail is one of the shortest files. Every worker sorts the same
    collection the same way (a stable sort), as xdist requires; ``-n 0`` keeps pytest-randomly's order."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    items.sort(key=lambda item: FILE_SECONDS.get(item.nodeid.split("::")[0], UNKNOWN_SECONDS), reverse=True)
