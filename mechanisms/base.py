"""The mechanism contract, seeding and the release grid (the registry is in ``registry``).

A mechanism is a frozen dataclass of validated parameters that samples a whole
batch of independent trials in one tensor computation
(``sample(dataset, *, trials, seed) -> ndarray of shape (trials, output_dim)``)
and says what it does as a frozen description (``privacy_description``), from
which the accountants build its claims (``claims(*, index=None)``).
"""

from __future__ import annotations

import abc
import contextlib
import copy
import dataclasses
import math
import re
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, check_int
from dpaudit.mechanisms import tiles
from dpaudit.mechanisms.accounting.descriptions import PrivacyDescription, Undeclared
from dpaudit.mechanisms.dataset import Dataset, as_dataset
from dpaudit.mechanisms.hooks import AuditHooks

if TYPE_CHECKING:
    from dpaudit.mechanisms.accounting.claims import Claim

__all__ = [
    "Mechanism",
    "check_mechanism",
    "param",
    "make_rng",
    "RELEASE_GRID",
    "snap",
]

SeedLike = int | np.random.SeedSequence
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: Released outputs are rounded to multiples of this power of two (by computation dtype): far above
#: the float spacing of the values, so their low bits carry no information (docs/theory.md 1.9).
RELEASE_GRID = {"float64": 2.0**-12, "float32": 2.0**-6}


def snap(outputs: np.ndarray, grid: float, *, toward_zero: bool = False, inplace: bool = False) -> np.ndarray:
    """``outputs`` rounded to multiples of the power of two ``grid`` (to nearest, or toward zero).

    Dividing and multiplying by a power of two are exact in binary floating
    point, so each result is exactly an integer times ``grid``; rounding
    toward zero never increases a coordinate's magnitude (it keeps a point of
    a ball about the origin inside the ball).
    """
    if inplace and isinstance(outputs, np.ndarray) and outputs.dtype.kind == "f" and outputs.flags.writeable:
        # times 1 / grid: the same exact result as dividing by the power of two, at the cost of a product
        np.multiply(outputs, 1.0 / grid, out=outputs)
        (np.trunc if toward_zero else np.rint)(outputs, out=outputs)
        np.multiply(outputs, grid, out=outputs)
        return outputs
    values = np.asarray(outputs, dtype=np.float64)
    scaled = values / grid
    snapped = (np.trunc(scaled) if toward_zero else np.rint(scaled)) * grid
    return snapped.astype(np.asarray(outputs).dtype, copy=False)


def param(default: Any = dataclasses.MISSING, doc: str = "") -> Any:
    """A dataclass field that carries a one-line documentation string."""
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata={"doc": doc})
    return dataclasses.field(default=default, metadata={"doc": doc})


def make_rng(seed: SeedLike) -> np.random.Generator:
    """A ``numpy.random.Generator`` (PCG64) from an int or a ``SeedSequence``.

    Distinct ``SeedSequence`` children (as spawned by the runner) give
    independent streams; the same seed always gives the same stream. NumPy's
    ziggurat sampler draws float64 normals with exact tails, faster than
    torch's float64 sampler on CPU; the computation itself runs in torch.
    """
    if isinstance(seed, np.random.SeedSequence):
        sequence = seed
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        if seed < 0:
            raise ParameterError(f"seed must be >= 0, got seed={seed}")
        sequence = np.random.SeedSequence(int(seed))
    else:
        raise ParameterError(
            f"seed must be a non-negative int or numpy.random.SeedSequence, got seed={seed!r}")
    return np.random.default_rng(sequence)


def check_mechanism(value: Any, name: str = "mechanism") -> "Mechanism":
    """``value`` if it is a :class:`Mechanism`; else a one-line ParameterError naming ``name`` and how to make one.

    A plain function, a class, a registered name or anything else is refused before any work is planned, with
    the call that would make it a mechanism (``dpaudit.from_callable`` for a function, ``dpaudit.make`` for a
    name, an instance for a class).

    Parameters
    ----------
    value : object
        What the caller passed as the mechanism.
    name : str
        The parameter's name, as messages show it.

    Returns
    -------
    Mechanism
        ``value`` itself.

    Raises
    ------
    ParameterError
        When ``value`` is not a :class:`Mechanism` instance.
    """
    if isinstance(value, Mechanism):
        return value
    wrap = ("wrap a function with dpaudit.from_callable(fn, output_dim=...) (one trial a call) or "
            "dpaudit.from_batched_callable(fn, output_dim=...)")
    if isinstance(value, type):
        shown = value.__qualname__
        remedy = (f"pass an instance, {shown}(...)" if issubclass(value, Mechanism) else
                  f"build one with dpaudit.make(NAME, ...) or {wrap}")
        raise ParameterError(f"{name} must be a dpaudit Mechanism, got the class {shown}: {remedy}")
    if callable(value):
        shown = getattr(value, "__qualname__", None) or type(value).__qualname__
        raise ParameterError(f"{name} must be a dpaudit Mechanism, got the function {shown!r}: {wrap}")
    if isinstance(value, str):
        raise ParameterError(f"{name} must be a dpaudit Mechanism, got the string {value!r}: build one with "
                             f"dpaudit.make({value!r}, ...)")
    shown = " ".join(repr(value).split())  # one line, whatever the object prints
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise ParameterError(f"{name} must be a dpaudit Mechanism (dpaudit.make(NAME, ...), an instance of a "
                         f"Mechanism subclass, or a function wrapped with dpaudit.from_callable), got "
                         f"{name}={shown} ({type(value).__name__})")


class Mechanism(AuditHooks, abc.ABC):
    """Base class of every mechanism.

    Subclasses are ``@dataclass(frozen=True)`` classes registered with
    :func:`register`; their fields are the public parameters (names used by
    configs and ``dpaudit bound --set``) and are validated in
    ``__post_init__`` through :meth:`validate`.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    #: Trials are sampled in tiles with their own generators, in threads (``mechanisms.tiles``).
    #: ``False`` for code the toolkit did not write, which may not be thread-safe.
    tiled: ClassVar[bool] = True
    #: Rows per tile (``tiles.TILE_TRIALS``); mechanisms with large per-trial state use smaller tiles.
    tile_trials: ClassVar[int] = tiles.TILE_TRIALS

    #: The magnitudes a real parameter may take (0 aside): the audit's float64 arithmetic (squares of outputs,
    #: likelihood ratios over squared noise, accountants) overflows or underflows outside them.
    magnitudes: ClassVar[tuple[float, float]] = (1e-100, 1e100)

    def __post_init__(self) -> None:
        try:
            self.validate()
        except ParameterError as exc:
            raise self._whole_rule(exc) from None
        self._check_magnitudes()

    def _check_magnitudes(self) -> None:
        """Refuse a real parameter outside :attr:`magnitudes` (after :meth:`validate`, which has its own rules),
        the message stating the parameter's whole rule (:meth:`_real_rule`)."""
        low, high = self.magnitudes
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, (float, np.floating)) and math.isfinite(value) and value != 0 \
                    and not low <= abs(value) <= high:
                raise ParameterError(f"{field.name} must be {self._real_rule(field.name)}, got "
                                     f"{field.name}={value!r}")

    def _real_rule(self, name: str, *, zero: bool | None = None, negative: bool | None = None) -> str:
        """The whole rule of the real parameter ``name``: its sign (from :meth:`validate`, probed where not given)
        and :attr:`magnitudes`, worded the same whichever side a value fails on.

        Parameters
        ----------
        name : str
            The parameter.
        zero, negative : bool, optional
            Whether :meth:`validate` accepts 0 and negative values (probed on a copy when ``None``).

        Returns
        -------
        str
            E.g. ``"> 0 and between 1e-100 and 1e+100 (an audit's float64 arithmetic overflows beyond)"``.
        """
        low, high = self.magnitudes
        zero = self._accepts(name, 0.0) if zero is None else zero
        negative = self._accepts(name, -1.0) if negative is None else negative
        span = f"between {low:g} and {high:g}{' in magnitude' if negative else ''}"
        sign = ("0 or " if zero else "nonzero and ") if negative else ("0 or " if zero else "> 0 and ")
        return f"{sign}{span} (an audit's float64 arithmetic overflows beyond)"

    def _accepts(self, name: str, value: float) -> bool:
        """Whether :meth:`validate` lets ``name`` take ``value`` (on a copy; a refusal of another parameter, or of
        the combination, counts as accepted)."""
        probe = copy.copy(self)
        object.__setattr__(probe, name, value)
        try:
            probe.validate()
        except ParameterError as exc:
            return not str(exc).startswith(f"{name} must be")
        except Exception:  # noqa: BLE001 - a probe that fails otherwise says nothing about the sign
            return True
        return True

    def _whole_rule(self, exc: ParameterError) -> ParameterError:
        """``exc``, or for a real parameter's sign rule (``check_real``'s "must be > 0" or ">= 0") the same
        refusal stating the whole rule, as :meth:`_check_magnitudes` words it."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name, None)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                continue
            match = re.fullmatch(rf"{re.escape(field.name)} must be (> 0|>= 0), got {re.escape(field.name)}=(.*)",
                                 str(exc))
            if match:
                rule = self._real_rule(field.name, zero=match.group(1) == ">= 0", negative=False)
                return ParameterError(f"{field.name} must be {rule}, got {field.name}={match.group(2)}")
        return exc

    # -- contract ------------------------------------------------------
    @abc.abstractmethod
    def validate(self) -> None:
        """Raise :class:`ParameterError` for any invalid parameter."""

    @property
    @abc.abstractmethod
    def output_dim(self) -> int:
        """Number of columns of :meth:`sample`'s output."""

    @property
    @abc.abstractmethod
    def record_dim(self) -> int:
        """Number of columns of one record of a dataset."""

    @property
    def n_records(self) -> int | None:
        """Number of records a dataset must hold (``None``: any number)."""
        return getattr(self, "n", None)

    @property
    def dataset_size(self) -> int | None:
        """The one number of records the claim is made for, by a mechanism without record positions that takes
        datasets of that size only (an OpenDP measurement on a sized domain: replace-one neighbours); ``None``:
        any number. ``dpaudit.search`` then builds datasets of that size only."""
        return None

    @abc.abstractmethod
    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        """Sample ``trials`` outputs in one batched computation.

        Called once per tile (:mod:`mechanisms.tiles`) with the tile's own
        generator; every trial must be independent of the others.
        """

    # -- what the mechanism says about itself -----------------------------
    #: Canary kinds this mechanism supports; the first is its default, the tightest known.
    canary_kinds: ClassVar[tuple[str, ...]] = ("input",)

    @property
    def privacy_description(self) -> PrivacyDescription:
        """What this mechanism does, as the frozen value the accountants read (``accounting.descriptions``).

        The claims are built from it alone (:meth:`claims`); a mechanism that
        states no guarantee (a user's function) is :class:`Undeclared`.
        """
        return Undeclared()

    def claims(self, *, index: int | None = None) -> list[Claim]:
        """Every theoretical bound for these parameters, applicable or not (with the reason).

        Built by the accountants from :attr:`privacy_description`
        (``accounting.builders.claims_for``), once per description.

        Parameters
        ----------
        index : int, optional
            The canary position (1-based) for per-index bounds; ``None``
            evaluates them at their worst index.

        Returns
        -------
        list of dpaudit.mechanisms.accounting.claims.Claim
        """
        if index is not None:
            if not self.has_positions:
                raise ParameterError(f"index applies to mechanisms with records in a fixed order; "
                                     f"{self.name} has none, got index={index}")
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 1 <= index <= self.n_records:
                raise ParameterError(f"index must be in 1..{self.n_records}, got index={index!r}")
            index = int(index)
        # the accountants (and SciPy under them) load with the first claim, not with every mechanism
        from dpaudit.mechanisms.accounting.builders import claims_for

        return claims_for(self.privacy_description, index)

    @property
    def schedule_steps(self) -> int | None:
        """Steps a scheduled canary may be inserted at (``None``: the mechanism takes no scheduled canary)."""
        return None

    @property
    def has_positions(self) -> bool:
        """True when records are processed in a fixed public order, so a canary has a position."""
        return self.n_records is not None

    @property
    def canary_dim(self) -> int:
        """Length of the canary direction ``u`` (the model dimension for iterations)."""
        return self.output_dim

    @property
    def zero_record_is_absent(self) -> bool:
        """True when a zero record acts as no record, so a zero canary realises add/remove."""
        return self.n_records is None

    #: False when a zero *input* record still has an effect (a model's bias), so an input canary paired
    #: with zero or removal realises replace-one only, whatever :attr:`zero_record_is_absent` says.
    zero_input_is_absent: ClassVar[bool] = True

    @property
    def label(self) -> str:
        """The name reports and messages use (a wrapped function's qualified name; else :attr:`name`)."""
        return self.name

    @property
    def iterations(self) -> int:
        """Sequential steps one trial runs (``steps`` of an iterative mechanism, else the records), for
        the size and time estimates of ``audit.statistics.budget``."""
        steps = getattr(self, "steps", None)
        return int(steps or self.n_records or 1)

    @property
    def size_parameter(self) -> tuple[str, int]:
        """``("dim", value)``: the parameter that sets the output size (the ``dim`` parameter where there
        is one, else the output dimension), named when an audit is too large."""
        dim = getattr(self, "dim", None)
        return ("dim", int(dim)) if isinstance(dim, (int, np.integer)) else ("dim", self.output_dim)

    @property
    def user_function(self) -> Any:
        """A user's function whose code decides the outputs (``from_callable``'s ``fn``, a model factory),
        fingerprinted with the audit; ``None`` by default."""
        fn = getattr(self, "fn", None)
        return fn if callable(fn) else None

    def canary_records(self, u: np.ndarray, *, reset: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The canary records ``(x, x')`` at the ends of the record space.

        Parameters
        ----------
        u : numpy.ndarray
            Unit canary direction of length :attr:`canary_dim`.
        reset : bool
            Ask for the reset form of the canary (mechanisms that have one).

        Returns
        -------
        record_a, record_b, direction
            The records in ``S`` and ``S'`` and a vector in output space along
            which outputs are larger under ``S'``.
        """
        raise ParameterError(f"canary kind 'input' is not defined for mechanism {self.name!r}")

    def output_direction(self, direction: np.ndarray) -> np.ndarray:
        """The output-space direction of a canary direction given in ``canary_dim`` coordinates (identity)."""
        return direction

    def gradient_canary(self) -> tuple[float, float]:
        """``(scale, sign)`` of a gradient-space canary.

        The canary inserts ``scale * u`` in ``S`` (``-scale * u`` or zero in
        ``S'``); outputs move along ``sign * u``, larger under ``S'``.
        """
        raise ParameterError(f"canary kind 'gradient' needs an iterative mechanism, got {self.name!r}")

    def with_boundary_start(self) -> "Mechanism":
        """The same mechanism started on the boundary of its domain (canary kind ``boundary``)."""
        raise ParameterError(f"canary kind 'boundary' needs a bounded iterative mechanism, got {self.name!r}")

    def random_background(self, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        """Random records for a ``background = "random"`` canary dataset."""
        return rng.standard_normal(shape) / np.sqrt(shape[1])

    def inapplicable(self) -> dict[str, str]:
        """Parameters that have no effect for these values of the others, each with the reason.

        Configs refuse such a key when it is given, :func:`make` when it is
        given a value other than its default, and reports leave them out.
        """
        return {}

    def working_bytes(self, trials: int) -> int:
        """A rough upper estimate of the memory one call ``sample(trials=trials)`` needs, in bytes.

        Tiles of :data:`tiles.TILE_TRIALS` rows run in :func:`tiles.threads`
        threads, each holding a few arrays of ``output_dim + canary_dim``
        columns; the output and its snapped copy take ``trials * output_dim``
        floats twice; the dataset is converted a few times. Mechanisms whose
        steps hold larger arrays (per-example gradients) add their own.
        """
        rows = min(trials, tiles.TILE_TRIALS) * max(tiles.threads(), 1)
        per_tile = rows * (self.output_dim + self.canary_dim) * 8 * 4
        output = trials * self.output_dim * 8 * 2
        data = (self.n_records or 1) * self.record_dim * 8 * 4
        return per_tile + output + data

    # -- shared behaviour ------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        """The parameters as a plain, JSON-friendly dict."""
        values = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            values[field.name] = list(value) if isinstance(value, tuple) else value
        return values

    def default_dataset(self) -> Dataset:
        """A dataset of zero records with the right shape (``n`` rows)."""
        n = self.n_records if self.n_records is not None else 1
        return Dataset(np.zeros((n, self.record_dim)))

    def sample(self, dataset: Any = None, *, trials: int, seed: SeedLike) -> np.ndarray:
        """Draw ``trials`` independent outputs of the mechanism on ``dataset``.

        Parameters
        ----------
        dataset : array_like or Dataset, optional
            One row per record, in the layout of :attr:`record_dim`
            (default: all-zero records).
        trials : int
            Number of independent runs, all computed in one batch.
        seed : int or numpy.random.SeedSequence
            The same seed gives the same array.

        Returns
        -------
        numpy.ndarray
            Shape ``(trials, output_dim)``.
        """
        trials = check_int("trials", trials, minimum=1)
        data = self.default_dataset() if dataset is None else as_dataset(dataset)
        self.check_dataset(data)
        rng = make_rng(seed)
        dtype = _DTYPES[getattr(self, "dtype", "float64")]
        # Tiles of trials run in parallel threads (mechanisms.tiles), each doing
        # its own noise and arithmetic; torch gets one intra-op thread so the
        # tiles do not compete with it for the cores.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            # our samplers need no autograd; user code (not tiled) may train with it
            with torch.no_grad() if self.tiled else contextlib.nullcontext():
                if self.tiled:  # each tile written into the output as it is made, and released there
                    out = np.empty((trials, self.output_dim), dtype=np.float32 if dtype == torch.float32 else np.float64)

                    def tile(rows: int, generator: np.random.Generator) -> np.ndarray:
                        with torch.no_grad():  # grad mode is per thread: the tile threads need their own
                            return self._tile(data, rows, generator, dtype)

                    return tiles.fill(tile, out, rng, self.tile_trials,
                                      finish=lambda block: self.release(block, inplace=True))
                array = self._tile(data, trials, rng, dtype)
        finally:
            torch.set_num_threads(threads)
        return self.release(array, inplace=True)  # the array is this call's own

    @property
    def release_grid(self) -> float | None:
        """The power-of-two grid outputs are snapped to before release (``None``: released as computed)."""
        return RELEASE_GRID[getattr(self, "dtype", "float64")]

    def release(self, outputs: np.ndarray, *, inplace: bool = False) -> np.ndarray:
        """Snap computed outputs to :attr:`release_grid` (Mironov 2012's snapping, without clamping).

        A computed float differs from the exact value of the ideal mechanism
        by rounding errors, and its low bits can depend on the dataset
        (Mironov 2012, "On significance of the least significant bits for
        differential privacy"). Rounding to a fixed grid far above the float
        spacing is post-processing of the ideal output, so the ideal
        mechanism's claims hold for the rounded one; the computed and the
        ideal rounded outputs differ only when the ideal value lies within
        the rounding error of a grid midpoint (docs/theory.md 1.9 bounds
        that probability). Dividing and multiplying by a power of two are
        exact, so every released value is an exact multiple of the grid.

        Acts on each value (row) alone: :meth:`sample` applies it to each
        tile's block of the output as the block is written, in place.
        """
        grid = self.release_grid
        if grid is None:
            return outputs
        return snap(outputs, grid, inplace=inplace)

    def _tile(self, data: Dataset, trials: int, rng: np.random.Generator,
              dtype: torch.dtype) -> np.ndarray:
        """One tile's outputs as an array of shape ``(trials, output_dim)``."""
        return self._sample(data, trials, rng, dtype).detach().cpu().numpy().reshape(trials, self.output_dim)

    def check_dataset(self, data: Dataset) -> None:
        """Raise :class:`ParameterError` if ``data`` does not fit this mechanism."""
        records = data.records
        if records.shape[1] != self.record_dim:
            raise ParameterError(
                f"dataset records must have {self.record_dim} columns for {self.name}, "
                f"got dataset shape {records.shape}")
        if self.n_records is not None and records.shape[0] != self.n_records:
            raise ParameterError(
                f"dataset must have n={self.n_records} records for {self.name}, "
                f"got {records.shape[0]}")
        if not np.all(np.isfinite(records)):
            raise ParameterError("dataset records must be finite, got NaN or inf")
        data.check_injected(records.shape[0], self.canary_dim)
        data.check_scheduled(self.schedule_steps, self.canary_dim, self.name)

    def check_dtype(self) -> None:
        """Validate the optional ``dtype`` parameter."""
        check_choice("dtype", getattr(self, "dtype", "float64"), _DTYPES)
