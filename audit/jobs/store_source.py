"""The scores of a stored audit, as the certifier reads them (``audit.jobs.streaming.ScoreSource``).

Calibration scores (or, for a score with a known law, scores drawn from that
law) to choose thresholds on, and the certification chunks one at a time.
``plan`` is the runner's plan of one audit (``audit.jobs.runner``): the id its chunks are stored under, job,
fitted scorers, canary pairs and number of certification trials.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from dpaudit.attacks.score_protocol import fitted_tail_model
from dpaudit.auditing.jobs.store import Store
from dpaudit.core.errors import NotExact

__all__ = ["StoreSource", "store_sources"]


class StoreSource:
    """The scores of one canary position, read from the store (``audit.jobs.streaming.ScoreSource``)."""

    def __init__(self, plan, store: Store, index: int, limit: int) -> None:
        self.plan, self.store, self.index, self.limit = plan, store, index, limit

    def calibration(self) -> tuple[np.ndarray, np.ndarray]:
        # a score with a known law (chosen by a portfolio or named): thresholds chosen on scores drawn
        # from that law, which are independent of every trial and, unlike the calibration trials, as many
        # as the certification trials (the tail the threshold sits in holds tens of them, not a few)
        reference = getattr(self.plan.scorers[self.index], "reference", None)
        if reference is not None:
            try:
                return reference(self.plan.n_cert, self.plan.job.settings.seed)
            except NotExact:
                pass
        cal_a = self.store.get_chunks(self.plan.draws_id, self.index, "a", "cal")
        cal_b = self.store.get_chunks(self.plan.draws_id, self.index, "b", "cal")
        if self.plan.job.fitted:
            return self.plan.scorers[self.index](cal_a), self.plan.scorers[self.index](cal_b)
        return cal_a, cal_b

    def planned(self) -> tuple[int, int]:
        """Certification trials per side in the first ``limit`` chunks (what :meth:`chunks` will yield)."""
        trials = min(self.plan.n_cert, self.limit * self.plan.job.settings.chunk_size)
        return trials, trials

    def tail_model(self) -> str:
        """How calibration rates place the test: the score function's declaration (``fitted_tail_model``), fitted
        or not (the projection of a release whose law is a Gaussian shift declares the tilt)."""
        return fitted_tail_model(self.plan.scorers[self.index])

    def chunks(self, side: str) -> Iterator[np.ndarray]:
        """The first ``limit`` certification chunks (all of them, unless the audit stops at a look)."""
        return itertools.islice(self.store.iter_chunks(self.plan.draws_id, self.index, side, "cert"), self.limit)


def store_sources(plan, store: Store, limit: int) -> dict[int, StoreSource]:
    """A :class:`StoreSource` for every canary position of ``plan`` (the runner's plan of one audit)."""
    return {index: StoreSource(plan, store, index, limit) for index in plan.pairs}
