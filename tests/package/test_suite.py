"""How the suite itself runs: spread over the cores by pytest-xdist, one numerical thread per worker."""

from __future__ import annotations

import os

import pytest


def test_each_worker_runs_torch_and_blas_on_the_threads_the_suite_gives_it():
    # tests/conftest.py sets OMP_NUM_THREADS (and OpenBLAS's and MKL's) to 1 before starting the workers, unless
    # the user set them; torch reads OMP_NUM_THREADS when it loads
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2:
        pytest.skip("one process (-n 0): the libraries keep their own thread counts")
    import torch

    assert os.environ.get("OPENBLAS_NUM_THREADS") and os.environ.get("MKL_NUM_THREADS")
    assert torch.get_num_threads() == int(os.environ["OMP_NUM_THREADS"])
