"""Helpers shared by tests."""

from __future__ import annotations

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
