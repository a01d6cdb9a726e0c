"""What a mechanism may tell an audit beyond sampling: exact laws, likelihood ratios, canary helpers.

:class:`AuditHooks` declares every such capability with its default (most
say "not known" by raising :class:`NotExact` or returning ``None``); the
base class :class:`~dpaudit.mechanisms.base.Mechanism` inherits them, and a
mechanism overrides those it can answer. The layers above ``mechanisms/``
call these methods directly, never look them up by name (docs/design.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.core.errors import NotExact, ParameterError
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["AuditHooks"]


class AuditHooks:
    """Capabilities a mechanism may offer to attacks, accountants and reports, with their defaults."""

    @property
    def has_log_likelihood_ratio(self) -> bool:
        """True when :meth:`log_likelihood_ratio` is implemented (the score ``exact``)."""
        return type(self).log_likelihood_ratio is not AuditHooks.log_likelihood_ratio

    def log_likelihood_ratio(self, outputs: np.ndarray, dataset_a: Dataset, dataset_b: Dataset) -> np.ndarray:
        """The exact ``log p_{S'}(o) - p_S(o)`` of each output (score ``exact``); none by default.

        Raises
        ------
        ParameterError
            When the mechanism has no exact likelihood ratio (:attr:`has_log_likelihood_ratio` is False).
        """
        raise ParameterError(f"score 'exact' needs a mechanism with an exact likelihood ratio, "
                             f"{self.name!r} has none")

    @property
    def exact_score_reads_whole_output(self) -> bool:
        """True when :meth:`log_likelihood_ratio` is the likelihood ratio of the whole release in closed form
        (a Gaussian release: the Neyman-Pearson test), so a portfolio takes the score ``exact`` without a
        contest: a choice made before any trial, which costs no confidence. False by default."""
        return False

    @property
    def projection_tail_model(self) -> str:
        """How the ``projection`` score's calibration rates place its epsilon test (``audit.statistics.tilt``):
        ``"tilt"`` where the release projected on a fixed direction is a Gaussian shift between the datasets
        (its log likelihood ratio linear in the projection), ``"calibration"`` (the counts) by default."""
        return "calibration"

    @property
    def trains_model(self) -> bool:
        """True when outputs describe trained models and :meth:`record_score` scores a record under them."""
        return type(self).record_score is not AuditHooks.record_score

    def record_score(self, outputs: np.ndarray, record: np.ndarray, name: str) -> np.ndarray:
        """A record's score (``canary-loss`` or ``logit-margin``) under the model each output describes.

        Raises
        ------
        ParameterError
            When outputs are not trained models (:attr:`trains_model` is False).
        """
        raise ParameterError(f"score {name!r} needs a mechanism that trains a model, {self.name!r} does not")

    def exact_steps(self, data: Dataset) -> tuple[list, dict[str, Any]]:
        """The affine one-dimensional steps of this mechanism on ``data``, for the exact accountant.

        Raises
        ------
        NotExact
            When the exact accountant does not cover this instance (the message says why).
        """
        raise NotExact(f"no exact accountant for mechanism {self.name!r}")

    def exact_output_laws(self, data_a: Dataset, data_b: Dataset) -> Any:
        """Closed-form laws of the release under ``S`` and ``S'``, when the mechanism knows them.

        Returns ``None`` (the default) to let the exact accountant propagate
        :meth:`exact_steps`, or an object with ``delta(eps)``,
        ``epsilon(delta)``, ``likelihood_ratio_law()`` and
        ``log_likelihood_ratio(outputs)`` (e.g.
        ``accounting.last_iterate.MixtureLaws``).

        Raises
        ------
        NotExact
            When the instance has no exact accountant (the message says why).
        """
        return None

    @property
    def default_index(self) -> int | None:
        """The 1-based position a canary takes when none is given: the last record, unless the mechanism knows
        a worse one (``dp-mf``: a record whose participation pattern attains the sensitivity)."""
        return getattr(self, "n_records", None)

    @property
    def default_pair(self) -> str:
        """The canary pair of a default audit (``"opposite"``; zero-out where only that relation fits)."""
        return "opposite"

    def default_pair_for(self, kind: str) -> str:
        """The canary pair of a default audit with a canary of ``kind`` (:attr:`default_pair` unless the
        mechanism's kinds differ: a model's target record is removed where its accountant bounds removal)."""
        return self.default_pair

    @property
    def chooses_targets(self) -> bool:
        """True when an input canary is a target record chosen by :meth:`input_target` (models)."""
        return False

    def input_target(self, target: Any, background: Dataset, position: int,
                     u: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
        """``(record, twin, description)``: the target record of an input canary at ``position``, the twin an
        ``"opposite"`` pair puts in its place, and one sentence on how the record was chosen.

        Raises
        ------
        ParameterError
            When the mechanism takes no target records (:attr:`chooses_targets` is False), or naming
            ``canary target`` and the value when it does not fit the data.
        """
        raise ParameterError(f"canary target chooses the record of an input canary of a mechanism that trains a "
                             f"model; {self.name!r} takes none")

    def check_input_target(self, target: Any) -> None:
        """Refuse a canary ``target`` this mechanism cannot realise (before any dataset is built); none by
        default, as :meth:`input_target` refuses every target."""

    def input_direction(self, record: np.ndarray, other: np.ndarray | None) -> np.ndarray:
        """The direction along which outputs end larger under ``S'`` when ``S`` holds ``record`` and ``S'`` holds
        ``other`` in its place (``None``: nothing, or a record of zero gradient).

        Raises
        ------
        ParameterError
            When the mechanism takes no target records.
        """
        raise ParameterError(f"{self.name!r} takes no target records")

    @property
    def start_description(self) -> str | None:
        """One sentence on the start point of the audited trainings (``None``: nothing to say), for reports."""
        return None

    def pair_relation(self, pair: str) -> Any:
        """The relation a canary ``pair`` realises here (``None``: the usual rule of ``attacks.canaries``).

        Raises
        ------
        ParameterError
            When the mechanism supports no relation for ``pair`` (e.g. add/remove with shuffled batches).
        """
        return None

    @property
    def released_steps(self) -> int | None:
        """Training steps one output holds as equal consecutive blocks (1: a last iterate; ``None``: not
        declared, so per-step scores read every column as a step)."""
        return None

    @property
    def releases_iterates(self) -> bool:
        """True when the output lists every iterate (per-step scores then read their increments)."""
        return False

    def score_law(self, data_a: Dataset, data_b: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The law of the ``exact`` score under ``S`` and ``S'``: ``(values, mass_a, mass_b)`` (for the ceiling).

        Exact, or simulated from the known laws when only they are known: then
        return a :class:`~dpaudit.mechanisms.accounting.score_law.ScoreLaw` whose ``source`` says so, with the number of
        draws (results and reports show it beside the ceiling), and give the
        simulation's error in the override's docstring.

        Raises
        ------
        NotExact
            When the law is not known (the default).
        """
        raise NotExact(f"no law of the exact score for mechanism {self.name!r}")

    def reference_scores(self, data_a: Dataset, data_b: Dataset, size: int, seed: int = 0
                         ) -> tuple[np.ndarray, np.ndarray]:
        """``size`` scores of the ``exact`` score per dataset drawn from the known laws (thresholds are
        chosen on them, never on certification trials).

        Raises
        ------
        NotExact
            When the laws are not known (the default).
        """
        raise NotExact(f"no reference scores for mechanism {self.name!r}")

    def surrogate_output_laws(self) -> Any:
        """Laws of a reference instance that stands in for this one where no exact value is known.

        ``None`` by default. A trained model returns the last-iterate
        linear-loss surrogate at its training parameters
        (``accounting.builders.model.surrogate_laws``): a reference for
        planning and reports, never a bound and never used by a verdict.
        """
        return None

    def clipped_record_gradients(self, data: Dataset) -> np.ndarray:
        """Each record's clipped gradient at the public start point, shape ``(n, canary_dim)``.

        Used to choose a canary direction from the data before any trial
        (canary direction ``least-varying``).

        Raises
        ------
        ParameterError
            When the mechanism has no per-record gradients.
        """
        raise ParameterError(f"canary direction 'least-varying' needs a mechanism with per-record gradients, "
                             f"got {self.name!r}")

    @property
    def fingerprint_data(self) -> bytes:
        """Bytes the outputs depend on beyond the parameters (a file a parameter names), fingerprinted with the
        audit, so that a changed file changes the audit id and no stored chunk is reused; empty by default."""
        return b""

    @property
    def seeded(self) -> bool:
        """False when the mechanism draws randomness that the seed dpaudit passes does not fix (a library seeded
        by the operating system, user code declared ``seeded=False``): a rerun with the same seed draws other
        trials, so messages and reports give no seed to reproduce with."""
        return True

    @property
    def declared_record_domain(self) -> tuple[float, float] | None:
        """The interval the records of a user function or library adapter may take (``None``: undeclared);
        the neighbour search draws its candidate pairs from it."""
        return None

    def assumptions(self) -> list[dict[str, Any]] | None:
        """The assumptions a library's accountant makes, each checked against the code as configured (``None``,
        the default: the mechanism states none). Each is a dict of ``name``, ``assumed``, ``holds`` (bool) and
        ``detail``; results and reports print them beside the claim (the conformance section)."""
        return None
