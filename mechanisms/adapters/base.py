"""What every library adapter shares: the query, its record domain, the claim, and blocks of trials.

An adapter is a :class:`~dpaudit.mechanisms.base.Mechanism` around an object
of a DP library (a diffprivlib mechanism, an OpenDP measurement, a python-dp
algorithm, an Opacus training run). It releases exactly what the library
releases (no snapping to the release grid: the library's float arithmetic is
part of what is audited) and reads its claim from the object itself.

The query maps a dataset (a column of records inside the declared record
domain) to the value the library randomises. The default query is the sum of
the records over the domain ``[0, sensitivity]``, so two datasets that differ
in one record (replace-one) have sums at most ``sensitivity`` apart, which is
the sensitivity the library object was configured with. Records outside the
domain are refused, so no audit can feed the library a pair its claim does
not cover.

Libraries whose calls cannot release many draws at once run in blocks of
:data:`BLOCK` trials, each block with its own seed drawn from the audit's
generator: outputs depend only on the seed, never on how many worker
processes ran the blocks.

A library object that does not pickle (an OpenDP measurement holds C
pointers) cannot be sent to worker processes as it is: :func:`from_recipe`
builds the mechanism from a module-level factory and plain arguments, and a
pickled copy of it is that call, made again in the worker.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_int, check_real
from dpaudit.mechanisms.accounting.descriptions import LibraryGuarantees
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["BLOCK", "LibraryMechanism", "check_version", "from_recipe", "library_version", "sum_query"]

#: Trials per seeded block for libraries called once per trial.
BLOCK = 2_000

#: Distribution names (what pip installs) of the libraries whose import name differs.
_DISTRIBUTIONS = {"pydp": "python-dp", "jax_privacy": "jax-privacy"}


def library_version(module: str) -> str:
    """The installed version of ``module``'s distribution (``"?"`` when unknown)."""
    # an optional library is imported by name when its adapter asks for it
    from importlib import metadata

    try:
        return metadata.version(_DISTRIBUTIONS.get(module, module))
    except metadata.PackageNotFoundError:
        return "?"


def _release(version: str) -> tuple[tuple[int, ...], bool] | None:
    """``(release numbers, final)`` of a version string (``"0.16.0"``, ``"2.13.0+cpu"``, ``"1.0rc1"``): final is
    False for a pre- or development release, which comes before its release; ``None`` when it has no numbers."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)(.*)", version)
    if match is None:
        return None
    numbers = tuple(int(part) for part in match.group(1).split("."))
    suffix = match.group(2).split("+")[0].lower()
    return numbers, not re.match(r"[.\-_]?(a|b|c|rc|alpha|beta|pre|preview|dev)\d*", suffix)


def _key(release: tuple[tuple[int, ...], bool], width: int) -> tuple[tuple[int, ...], bool]:
    numbers, final = release
    return numbers + (0,) * (width - len(numbers)), final


def version_supported(version: str, supported: str) -> bool:
    """True when ``version`` lies in ``supported``, a comma-separated list of ``>=X`` and ``<Y`` bounds (PEP 440's
    order on release numbers: a pre-release comes before its release, and ``<Y`` takes no pre-release of ``Y``)."""
    given = _release(version)
    if given is None:
        return True  # no version to compare (a build from source): nothing to refuse on
    for bound in (part.strip() for part in supported.split(",")):
        operator, limit = (">=", bound[2:]) if bound.startswith(">=") else ("<", bound[1:])
        release = _release(limit)
        if release is None:
            raise ValueError(f"internal: bad version bound {bound!r} in {supported!r}")  # pragma: no cover
        width = max(len(given[0]), len(release[0]))
        below = _key(given, width) < _key(release, width)
        if operator == "<" and _key(given, width)[0] == _key(release, width)[0]:
            below = False  # PEP 440: "<2.1" takes no pre-release of 2.1 either
        if (operator == ">=" and below) or (operator == "<" and not below):
            return False
    return True


def check_version(module: str, supported: str, adapter: str) -> str:
    """The installed version of ``module``, or a one-line ParameterError when it lies outside ``supported``.

    Parameters
    ----------
    module : str
        The library's import name (``"opendp"``, ``"pydp"``).
    supported : str
        The releases the adapter reads correctly, as ``">=0.13"`` or ``">=2.0,<2.1"`` (its module's
        ``SUPPORTED_VERSIONS``).
    adapter : str
        The adapter's function, as the message names it (``"from_opendp"``).

    Returns
    -------
    str
        The installed version (``"?"`` when the distribution has no metadata: nothing is refused then).

    Raises
    ------
    ParameterError
        Naming the installed version, the supported range, and two ways on: install a supported release, or
        audit the installed one through ``dpaudit.from_callable`` (docs/guide.md, "Older library releases").
    """
    version = library_version(module)
    if version != "?" and not version_supported(version, supported):
        distribution = _DISTRIBUTIONS.get(module, module)
        raise ParameterError(f"{adapter} supports {distribution} {supported}, got {distribution} {version} "
                             f"installed: pip install '{distribution}{supported}', or audit this release through "
                             f"dpaudit.from_callable (docs/guide.md, \"Older library releases\")")
    return version


def require(module: str, extra: str = "libraries") -> Any:
    """Import ``module`` or raise a ParameterError that says how to install it."""
    # an optional library is imported by name when its adapter asks for it
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ParameterError(f"this adapter needs the {module!r} package: pip install 'dpaudit[{extra}]'") from None


def sum_query(records: np.ndarray) -> np.ndarray:
    """The default query: the sum of the records (one number per column)."""
    return np.asarray(records, dtype=np.float64).sum(axis=0)


def from_recipe(factory: Callable[..., "LibraryMechanism"], *args: Any, **kwargs: Any) -> "LibraryMechanism":
    """``factory(*args, **kwargs)``, a mechanism that pickles as this call: worker processes build their own.

    For library objects that do not pickle (an OpenDP measurement holds C pointers): the audit's worker
    processes (``workers`` of ``dpaudit.audit``, ``dpaudit run``, the gallery) and :meth:`LibraryMechanism.draw`'s
    are sent the factory and the arguments, never the object, and call the factory once per task they unpickle.

    Parameters
    ----------
    factory : callable
        A module-level function (pickled by its name) returning a library mechanism, such as one that builds
        an OpenDP measurement and returns ``from_opendp(measurement, ...)``.
    *args, **kwargs
        Plain arguments of ``factory`` (numbers, strings, tuples: what pickles).

    Returns
    -------
    LibraryMechanism
        What ``factory`` returns, carrying the call as its :attr:`~LibraryMechanism.recipe`.

    Raises
    ------
    ParameterError
        When ``factory`` returns no library mechanism (``from_*`` of :mod:`dpaudit.mechanisms.adapters`).
    """
    mechanism = factory(*args, **kwargs)
    if not isinstance(mechanism, LibraryMechanism):
        raise ParameterError(f"from_recipe: factory must return a library mechanism (from_opendp, from_pydp, ...), "
                             f"got {type(mechanism).__name__} from {getattr(factory, '__qualname__', factory)!r}")
    return dataclasses.replace(mechanism, recipe=(factory, args, kwargs))


def _rebuild(factory: Callable[..., "LibraryMechanism"], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> "LibraryMechanism":
    """The mechanism of a recipe, where a pickled copy is loaded (:meth:`LibraryMechanism.__reduce_ex__`)."""
    return from_recipe(factory, *args, **kwargs)


def _run_block(mechanism: "LibraryMechanism", values: np.ndarray, size: int, seed: int) -> np.ndarray:
    return mechanism.draw_block(values, size, seed)


@dataclasses.dataclass(frozen=True)
class LibraryMechanism(Mechanism):
    """Base of the library adapters (not registered: built by ``from_*`` functions).

    Subclasses set :attr:`library`, implement :meth:`draw` (``trials`` draws
    of the library on the query values, with a ``numpy`` generator) or
    :meth:`draw_block` (one seeded block), and :meth:`library_guarantees`.
    """

    query: Callable[[np.ndarray], Any] | None = None
    sensitivity: float = 1.0
    record_domain: tuple[float, float] | None = None
    dim: int = 1
    workers: int = 1
    label: str = ""
    #: ``(factory, args, kwargs)`` with ``factory(*args, **kwargs)`` this mechanism (:func:`from_recipe`); a pickled
    #: copy (a worker process's) is then that call, made again where it is unpickled
    recipe: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None = dataclasses.field(
        default=None, compare=False, repr=False, kw_only=True)

    library = ""
    tiled = False  # library code: one call sequence, no threads
    canary_kinds = ()  # audits take a dataset pair (see :meth:`neighbours`)
    release_grid = None  # released exactly as the library computes it
    #: False when the library's randomness comes from the OS and cannot be seeded (outputs not reproducible;
    #: the ``seeded`` hook of ``mechanisms.hooks``: messages and reports then give no seed to reproduce with)
    seeded = True

    def validate(self) -> None:
        check_real("sensitivity", self.sensitivity, positive=True)
        check_int("dim", self.dim, minimum=1)
        check_int("workers", self.workers, minimum=1)
        if self.query is not None and not callable(self.query):
            raise ParameterError(f"query must be callable, got query={self.query!r}")
        low, high = self.domain
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ParameterError(f"record_domain must be two finite numbers low < high, got "
                                 f"record_domain={self.record_domain!r}")

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickled as its :attr:`recipe` when it has one (the library object is built again where it is
        unpickled), else as the dataclass it is."""
        if self.recipe is None:
            return super().__reduce_ex__(protocol)
        return _rebuild, self.recipe

    @property
    def declared_record_domain(self) -> tuple[float, float]:
        return self.domain

    @property
    def domain(self) -> tuple[float, float]:
        """The record domain ``(low, high)``; default ``(0, sensitivity)``."""
        if self.record_domain is None:
            return 0.0, float(self.sensitivity)
        low, high = self.record_domain
        return float(low), float(high)

    @property
    def output_dim(self) -> int:
        return self.dim

    @property
    def record_dim(self) -> int:
        return 1

    @property
    def n_records(self) -> None:
        return None

    @property
    def params(self) -> dict[str, Any]:
        return {"library": self.library, "version": library_version(self.library), "object": self.label,
                "query": getattr(self.query, "__qualname__", "sum"), "sensitivity": self.sensitivity,
                "record_domain": list(self.domain), **self.object_params()}

    def object_params(self) -> dict[str, Any]:
        """The library object's own parameters, as the result records them."""
        return {}

    def check_dataset(self, data: Dataset) -> None:
        records = data.records
        low, high = self.domain
        if not np.all(np.isfinite(records)) or records.size and (records.min() < low or records.max() > high):
            raise ParameterError(f"records must lie in the record domain [{low:g}, {high:g}] the claim "
                                 f"covers, got values in [{records.min():g}, {records.max():g}]")

    def neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """The default pair ``(S, S')``: one record at each end of the record domain."""
        low, high = self.domain
        return np.array([[low]]), np.array([[high]])

    def query_values(self, records: np.ndarray) -> np.ndarray:
        """The query on ``records`` as ``dim`` numbers."""
        value = (self.query or sum_query)(np.asarray(records, dtype=np.float64).reshape(-1))
        value = np.asarray(value, dtype=np.float64).reshape(-1)
        if value.size != self.dim:
            raise ParameterError(f"query must return {self.dim} number(s), got {value.size}")
        return value

    def _query_covered(self) -> str | None:
        """Why the query's sensitivity over the record domain exceeds the object's (``None``: covered)."""
        if self.query is not None:
            return None  # a user query: its sensitivity is the user's declaration
        low, high = self.domain
        if high - low > self.sensitivity * (1 + 1e-12):
            return (f"records in [{low:g}, {high:g}] move the sum by up to {high - low:g}, above the "
                    f"sensitivity {self.sensitivity:g} the library object was configured with")
        return None

    def relations(self) -> list[str]:
        """The neighbouring relations the object's claim covers for this query and record domain.

        Replace-one always (the domain keeps the query within the sensitivity);
        add/remove too when adding a record of the domain moves the query by at
        most the sensitivity (the default sum over a domain that holds 0).
        """
        low, high = self.domain
        adds = self.query is not None or (low <= 0 <= high and max(-low, high) <= self.sensitivity)
        return ["replace-one", "add-remove"] if adds else ["replace-one"]

    # -- sampling ------------------------------------------------------------
    def draw(self, values: np.ndarray, trials: int, rng: np.random.Generator) -> np.ndarray:
        """``trials`` releases on ``values`` (:meth:`call_argument`), shape ``(trials, dim)``.

        The default runs seeded blocks of :data:`BLOCK` trials (in worker processes when ``workers > 1``).
        """
        seeds = rng.integers(2**63, size=-(-trials // BLOCK))
        sizes = [min(BLOCK, trials - k * BLOCK) for k in range(len(seeds))]
        if self.workers == 1 or len(seeds) == 1:
            blocks = [self.draw_block(values, size, int(seed)) for size, seed in zip(sizes, seeds)]
        else:
            with concurrent.futures.ProcessPoolExecutor(min(self.workers, len(seeds))) as pool:
                blocks = list(pool.map(_run_block, [self] * len(seeds), [values] * len(seeds), sizes,
                                       [int(s) for s in seeds]))
        return np.concatenate(blocks, axis=0)

    def draw_block(self, values: np.ndarray, size: int, seed: int) -> np.ndarray:
        """One block of ``size`` releases from its own seed (libraries called once per trial)."""
        raise NotImplementedError

    def call_argument(self, data: Dataset) -> np.ndarray:
        """What :meth:`draw` is given: the query's values (libraries that take the records override it)."""
        return self.query_values(data.records)

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        values = self.call_argument(data)
        rows = np.asarray(self.draw(values, trials, rng), dtype=np.float64).reshape(trials, self.dim)
        return torch.from_numpy(np.ascontiguousarray(rows))

    # -- what the library states ------------------------------------------------
    def library_guarantees(self) -> list:
        """The guarantees read from the library object (``accounting.descriptions``: ``FixedGuarantee`` and
        the like), one per relation the object covers."""
        raise NotImplementedError

    @property
    def privacy_description(self) -> LibraryGuarantees:
        """What the library states about the object, and whether it covers the query as audited."""
        return LibraryGuarantees(tuple(self.library_guarantees()), not_covered=self._query_covered())
