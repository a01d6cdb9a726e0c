"""Test-suite configuration: pytester for the plugin tests, and one thread per worker for numerical libraries."""

import os

pytest_plugins = ["pytester"]

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
