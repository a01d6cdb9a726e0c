"""How the suite itself runs: spread over the cores by pytest-xdist, one numerical thread per worker."""

from __future__ import annotations

import os

import pytest


def test_each_worker_runs_torch_and_blas_on_the_threads_the_suite_gives_it():
    # tests/conftest.py sets OMP_NUM_THREADS to 1 before starting the workers unless the user set it, and
    # OpenBLAS's and MKL's to the same unless set; torch reads them when it loads (at most one thread a core)
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2:
        pytest.skip("one process (-n 0): the libraries keep their own thread counts")
    import torch

    threads = int(os.environ["OMP_NUM_THREADS"])
    assert int(os.environ["OPENBLAS_NUM_THREADS"]) >= 1 and int(os.environ["MKL_NUM_THREADS"]) >= 1
    assert 1 <= torch.get_num_threads() <= max(threads, int(os.environ["MKL_NUM_THREADS"]))
    if threads == 1 and os.environ["MKL_NUM_THREADS"] == "1":  # the suite's own setting
        assert torch.get_num_threads() == 1
