"""What a mechanism does, as frozen values: the only thing the claim builders read.

A mechanism states what it does (``Mechanism.privacy_description``): its
sampling, noise, sensitivity, steps, projection, relation and release, as
one frozen, hashable value of a type below. ``accounting.builders`` alone
turns a description into claims, through builders that say which types they
support (``claims_for``); a description never computes its own privacy, and
no module of ``accounting/`` imports a mechanism. Equal descriptions give the
same claims, so claims are built once per description and kept.

A field never changes meaning: a new meaning is a new type (as
``dp_accounting.dp_event`` does for its events).

References
----------
Google's ``dp_accounting`` (``dp_event.py``: mechanisms described as frozen
events, accountants that say which events they support).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

__all__ = [
    "ClippedGradientTraining",
    "ConvexSet",
    "FixedGuarantee",
    "GaussianGuarantee",
    "InapplicableGuarantee",
    "KernelIteration",
    "LibraryGuarantees",
    "LossTerms",
    "MatrixFactorizationTraining",
    "MinibatchNoisySgd",
    "MultiEpochNoisySgd",
    "NoisyQuery",
    "PrivacyDescription",
    "ProfileGuarantee",
    "ProjectedNoisySgd",
    "ShuffledRandomizedResponse",
    "Strategy",
    "Undeclared",
    "ZcdpGuarantee",
]

_frozen = dataclasses.dataclass(frozen=True, slots=True)


@_frozen
class LossTerms:
    """A per-record loss as the bounds see it: its constants on ``K`` and what is known of its shape.

    Attributes
    ----------
    name : str
        The built-in loss (``"linear"``, ``"logistic"``, ...), or ``"user"`` for a loss of one's own.
    label : str
        The loss as the user named it (``"linear"``, ``"FILE.py:NAME"``), for messages.
    lipschitz, smoothness, strong_convexity : float
        ``L``, ``beta`` and ``lambda`` on ``K`` (``lambda < 0``: the loss is concave along some line).
    convex : bool
        False for the built-in losses known not to be convex (the steps expand).
    """

    name: str
    label: str
    lipschitz: float
    smoothness: float
    strong_convexity: float
    convex: bool

    @property
    def own(self) -> bool:
        """A loss of the user's own: nothing is known of its shape."""
        return self.name == "user"


@_frozen
class ConvexSet:
    """The convex set ``K`` iterates are projected onto (``kind="whole"``: no projection)."""

    kind: str
    diameter: float
    low: float = -math.inf
    high: float = math.inf


class PrivacyDescription:
    """Base of every description (a marker: the builders dispatch on the concrete type)."""

    __slots__ = ()


@_frozen
class Undeclared(PrivacyDescription):
    """A mechanism that states no guarantee of its own (a user's function): no claims, the caller's
    ``claimed_epsilon`` is the claim."""

    reason: str = "a function of your own states no guarantee; give claimed_epsilon"


@_frozen
class NoisyQuery(PrivacyDescription):
    """A query plus noise: Gaussian (``spread`` = std; sensitivities in L2) or Laplace (``spread`` = scale per
    coordinate; sensitivities in L1). ``sensitivities`` pairs each relation the release is claimed for with the
    query's sensitivity under it, e.g. ``(("add-remove", 1.0), ("replace-one", 2.0))`` for a clipped sum."""

    noise: str
    spread: float
    sensitivities: tuple[tuple[str, float], ...]


@_frozen
class ShuffledRandomizedResponse(PrivacyDescription):
    """``n`` users' bits, each through randomized response of local epsilon ``epsilon0``, shuffled."""

    n: int
    epsilon0: float


@_frozen
class KernelIteration(PrivacyDescription):
    """A contractive noisy iteration over ``n`` records in a public order: ``X <- Pi_K(psi_t(X) + u_t +
    noise)``, ``|u_t| <= shift``, every later map ``rho``-Lipschitz; replace-one changes one ``u_t``."""

    n: int
    dim: int
    noise: str
    spread: float
    shift: float
    rho: float
    region: ConvexSet


@_frozen
class ProjectedNoisySgd(PrivacyDescription):
    """One pass of projected noisy SGD over ``n`` records in a public order, last iterate released
    (``variant``: ``"plain"``, ``"skip"`` or ``"stop"``; Feldman et al. 2018, Alg. 1)."""

    n: int
    dim: int
    eta: float
    noise: str
    spread: float
    variant: str
    loss: LossTerms
    region: ConvexSet


@_frozen
class MultiEpochNoisySgd(PrivacyDescription):
    """``epochs`` passes of projected noisy SGD in a fixed order, last iterate (Feldman et al. 2018, Alg. 2)."""

    n: int
    dim: int
    eta: float
    noise: str
    spread: float
    epochs: int
    loss: LossTerms
    region: ConvexSet


@_frozen
class MinibatchNoisySgd(PrivacyDescription):
    """Noisy mini-batch SGD: batches of (expected) size ``batch_size`` drawn by ``sampling``, Gaussian noise of
    std ``noise_std`` on the mean gradient, ``release`` ``"final"`` or ``"iterates"``; ``smoothing`` is the
    Laplacian smoothing constant of DP-LSSGD (``None`` for DP-SGD)."""

    n: int
    dim: int
    batch_size: int
    steps: int
    eta: float
    noise_std: float
    sampling: str
    release: str
    loss: LossTerms
    region: ConvexSet
    smoothing: float | None = None

    @property
    def sample_rate(self) -> float:
        """``q = m / n``."""
        return self.batch_size / self.n

    @property
    def batches_per_epoch(self) -> int:
        """``n / m``: the steps of one epoch of shuffled batches."""
        return self.n // self.batch_size


@_frozen
class Strategy:
    """A correlated-noise strategy over ``steps`` steps (its matrices: ``accounting.strategies``).

    Attributes
    ----------
    kind : str
        ``"identity"``, ``"tree"``, ``"toeplitz"``, ``"banded-sqrt"`` or ``"dense"``.
    steps : int
        ``n``: the number of steps (rows of ``C``).
    coefficients : tuple of float
        The Toeplitz coefficients ``c_0, c_1, ...`` (``"toeplitz"`` and ``"banded-sqrt"``; empty otherwise).
    epoch_steps : int
        Steps per epoch: the tree restarts every ``epoch_steps`` steps (``"tree"``).
    matrix : tuple of tuple of float or None
        ``C`` itself for ``"dense"`` (equal strategies compare by :attr:`digest`).
    digest : str
        SHA-256 prefix of a dense ``C``'s float64 bytes.
    label : str
        How the user named it (a file, a library's strategy), for messages and reports.
    """

    kind: str
    steps: int
    coefficients: tuple[float, ...] = ()
    epoch_steps: int = 0
    matrix: tuple[tuple[float, ...], ...] | None = dataclasses.field(default=None, compare=False, repr=False)
    digest: str = ""
    label: str = ""

    @property
    def square(self) -> bool:
        """True when the noise is ``C^{-1} z`` for a square lower-triangular ``C`` (all but the tree)."""
        return self.kind != "tree"

    def describe(self) -> str:
        """One line for reports: the kind and its parameters."""
        if self.kind == "toeplitz":
            shown = ", ".join(f"{c:g}" for c in self.coefficients[:6])
            return f"Toeplitz C, coefficients ({shown}{', ...' if len(self.coefficients) > 6 else ''})"
        if self.kind == "banded-sqrt":
            return f"banded square root of the prefix sums, {len(self.coefficients)} bands"
        if self.kind == "tree":
            return f"binary tree (DP-FTRL), restarted every {self.epoch_steps} steps"
        if self.kind == "dense":
            return f"dense C from {self.label} ({self.digest})"
        return "identity (independent noise: DP-SGD)"


@_frozen
class MatrixFactorizationTraining(PrivacyDescription):
    """DP matrix-factorisation training: ``steps`` steps of batches of ``batch_size`` records, each record in
    ``epochs`` of them (``selection`` ``"cyclic"``: the same slot every epoch; ``"shuffled"``: a fresh order
    every epoch), the clipped gradient sum plus ``noise_multiplier L (M z)_t`` with ``M`` the strategy's noise
    factor; ``release`` ``"final"`` or ``"iterates"`` (docs/theory.md 12)."""

    strategy: Strategy
    epochs: int
    batch_size: int
    noise_multiplier: float
    selection: str
    release: str
    dim: int
    loss: LossTerms
    region: ConvexSet

    @property
    def steps(self) -> int:
        return self.strategy.steps

    @property
    def epoch_steps(self) -> int:
        """``p``: steps per epoch (the cyclic period)."""
        return self.steps // self.epochs


@_frozen
class ClippedGradientTraining(PrivacyDescription):
    """A torch model trained on clipped per-example gradients (clip ``C``, noise ``noise_multiplier * C`` on the
    sum): ``algorithm`` ``"dp-sgd"``, ``"dp-lssgd"`` or ``"pnsgd"`` (one use per epoch, in order).

    ``iteration`` is the ``pnsgd`` description with the same constants where amplification by iteration
    applies (``None``, and ``iteration_reason`` says why not).
    """

    algorithm: str
    n: int
    batch_size: int
    steps: int
    epochs: int
    noise_multiplier: float
    sampling: str
    release: str
    convex: bool
    model: str
    model_label: str
    iteration: ProjectedNoisySgd | None = None
    iteration_reason: str = ""


# -- what a library states about an object of its own ---------------------------------------------------
@_frozen
class FixedGuarantee:
    """``(epsilon, delta)`` as a library states it for one relation."""

    name: str
    citation: str
    relation: str
    epsilon: float
    delta: float = 0.0


@_frozen
class ZcdpGuarantee:
    """``rho``-zCDP as a library states it."""

    name: str
    citation: str
    relation: str
    rho: float


@_frozen
class GaussianGuarantee:
    """The exact profile of a Gaussian mechanism with ``mu = sensitivity / std``."""

    name: str
    citation: str
    relation: str
    mu: float


@_frozen
class ProfileGuarantee:
    """A privacy profile a library computes: ``epsilon_of(delta)`` and ``delta_of(epsilon)``."""

    name: str
    citation: str
    relation: str
    epsilon_of: Callable[[float], float] = dataclasses.field(compare=False)
    delta_of: Callable[[float], float] = dataclasses.field(compare=False)
    #: what identifies the profile (the library's parameters), so equal objects compare equal
    key: tuple = ()


@_frozen
class InapplicableGuarantee:
    """A guarantee the library states that does not cover this use, with the reason."""

    name: str
    citation: str
    relation: str
    reason: str


Guarantee = FixedGuarantee | ZcdpGuarantee | GaussianGuarantee | ProfileGuarantee | InapplicableGuarantee


@_frozen
class LibraryGuarantees(PrivacyDescription):
    """What a DP library states about a configured object, read from the object (``mechanisms.adapters``).

    ``not_covered`` says why the stated guarantees do not cover the query as audited (``None``: covered);
    every guarantee is then listed as not applicable with that reason.
    """

    guarantees: tuple[Guarantee, ...]
    not_covered: str | None = None
