"""The registry of the documents' figures that ``tests/package/test_doc_figures.py`` checks (issue 73).

Its kinds (:class:`Recomputed`, :class:`AssertedBy`, :class:`Printed`, :class:`Recorded`), the recomputation of
every (a) figure (:data:`RECOMPUTE`) and :data:`FIGURES`: each line of README.md and docs/guide.md that holds a
figure, found by an anchor, with its figures in order and how each is checked. The checks and their tests are
in ``test_doc_figures.py``; what each kind means is said there.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DELTA = 1e-5


# -- the registry's kinds ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class Recomputed:
    """(a) recomputed here by ``RECOMPUTE[name]``."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class AssertedBy:
    """(b) asserted by ``test`` (``path::function``), whose source holds ``literal`` (default: the figure); a
    literal with more digits must round to the figure."""

    test: str
    literal: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Printed:
    """(b) part of what the text says a Python block prints: ``test_python_blocks_of_the_docs_run_as_written``
    (tests/package/test_distribution.py) compares it with the block's output."""


@dataclasses.dataclass(frozen=True, slots=True)
class Recorded:
    """(c) measured by the command kept in ``benchmarks/records/doc_figures/<record>``, whose output holds
    ``literal`` (default: the figure); a literal with more digits must round to the figure."""

    record: str
    literal: str | None = None


Check = Recomputed | AssertedBy | Printed | Recorded


@dataclasses.dataclass(frozen=True, slots=True)
class Line:
    """The figures of one line of a document, in order, each with its check; ``anchor`` is a piece of the line
    found on no other line outside code blocks."""

    document: str
    anchor: str
    figures: tuple[tuple[str, Check], ...]


# -- (a) recomputations -------------------------------------------------------------------------------------
# Each recomputation imports what it uses inside its function: torch, scipy and dp-accounting then load for the
# one test that recomputes, and the registry's tests (and collection) stay light.
def _make(name: str, **params: object):
    """``dpaudit.make(name, **params)``."""
    # dpaudit's mechanisms load with the recomputation (see above)
    import dpaudit

    return dpaudit.make(name, **params)


def _claims(mechanism) -> dict[tuple[str, str], float]:
    """``{(name, relation): epsilon at DELTA}`` of a mechanism's applicable claims."""
    return {(c.name, str(c.relation)): c.epsilon(DELTA) for c in mechanism.claims() if c.applicable}


@functools.cache
def _dp_sgd_poisson() -> dict[tuple[str, str], float]:
    """The guide's DP-SGD example: ``q = 0.01`` (10 of 1,000 records), noise multiplier 1, 100 steps."""
    return _claims(_make("dp-sgd", n=1000, batch_size=10, steps=100, noise_std=0.1, sampling="poisson"))


@functools.cache
def _dp_sgd_shuffle_as_poisson() -> float:
    """``examples/dp_sgd_shuffle.toml``'s mechanism accounted as Poisson: what ``poisson-as-reported`` reports."""
    # the standard library's TOML reader, needed by this recomputation alone
    import tomllib

    table = tomllib.loads((ROOT / "examples" / "dp_sgd_shuffle.toml").read_text(encoding="utf-8"))["mechanism"]
    params = {key: value for key, value in table.items() if key not in ("name", "sampling", "output")}
    return _claims(_make(table["name"], sampling="poisson", **params))[("sgm-pld", "add-remove")]


@functools.cache
def _dp_mf_tree() -> dict[tuple[str, str], float]:
    """The guide's ``dpaudit bound dp-mf --set n=64 --set steps=64 --set epochs=4 --set strategy=tree
    --set noise_multiplier=4 --delta 1e-5``."""
    return _claims(_make("dp-mf", n=64, steps=64, epochs=4, strategy="tree", noise_multiplier=4.0))


def _model_claim(name: str, *, q: float, steps: int, relation: str = "add-remove") -> float:
    """A DP-SGD model's claim as ``mechanisms.accounting.builders.model`` calls it (noise multiplier 1)."""
    # dp-accounting loads with the recomputation (see above)
    from dpaudit.mechanisms.accounting.builders.model import DEFAULT_ORDERS, MTZ, rdp_claim, subsampled_gaussian_rdp
    from dpaudit.mechanisms.accounting.tight import pld_claim

    if name == "sgm-rdp":
        rdp = subsampled_gaussian_rdp(DEFAULT_ORDERS, sample_rate=q, noise_multiplier=1.0, steps=steps)
        return rdp_claim(name, MTZ, relation, DEFAULT_ORDERS, rdp).epsilon(DELTA)
    return pld_claim(name, sampling_rate=q, noise_multiplier=1.0, steps=steps, relation=relation).epsilon(DELTA)


@functools.cache
def _zoo_claims(suite: str) -> dict[str, tuple[float, float | None]]:
    """``{case: (claim, true epsilon)}`` of a training zoo's cases (``dp-mf``, or ``dp-sgd`` without Opacus's,
    which need Opacus: tests/package/test_doc_figure_audits.py), from the cases' own definitions."""
    # the zoos import torch (see above)
    from dpaudit.auditing.checks.zoo.dpmf import DPMF_ZOO
    from dpaudit.auditing.checks.zoo.dpsgd import DPSGD_ZOO

    cases = DPMF_ZOO if suite == "dp-mf" else [case for case in DPSGD_ZOO if case.needs != "opacus"]
    return {case.name: (float(case.claim(case.build()[0])), case.true_epsilon) for case in cases}


@functools.cache
def _scheduled() -> tuple[float, float]:
    """``every = 5`` on 250 full-batch steps at noise multiplier 15.81: (exact last iterate, every iterate)."""
    # the canary schedules and the exact engine load with the recomputation (see above)
    from dpaudit.attacks.canaries import CanarySpec
    from dpaudit.mechanisms.accounting.builders import pair_claims_for
    from dpaudit.mechanisms.accounting.instances import exact_epsilon

    mech = _make("dp-sgd", n=100, batch_size=100, steps=250, noise_std=0.1581)
    pair = CanarySpec(every=5).build(mech, None)
    claims = pair_claims_for(mech.privacy_description, pair.dataset_a, pair.dataset_b, str(pair.relation),
                             mech.claims())
    every = next(c for c in claims if c.name == "scheduled-composition")
    return exact_epsilon(mech, pair.dataset_a, pair.dataset_b, DELTA), every.epsilon(DELTA)


def _gaussian(mu: float) -> float:
    """The Gaussian mechanism's exact epsilon at ``mu`` (sensitivity over noise)."""
    # scipy loads with the recomputation (see above)
    from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon

    return float(gaussian_epsilon(DELTA, mu))


def _zcdp(rho: float) -> float:
    """A zCDP guarantee as the library builder converts it (Canonne-Kamath-Steinke Prop. 12)."""
    # the library builder loads with the recomputation (see above)
    from dpaudit.mechanisms.accounting.builders.library import ZCDP_ORDERS
    from dpaudit.mechanisms.accounting.claims import rdp_claim

    return rdp_claim("zcdp", "", "replace-one", ZCDP_ORDERS, rho * ZCDP_ORDERS).epsilon(DELTA)


@functools.cache
def _digits_band() -> tuple[float, float, float]:
    """The full-batch composition's law at ``mu = sqrt(100) / 5 = 2``, 900 certification trials per side:
    (ceiling, band low, band high)."""
    # scipy loads with the recomputation (see above)
    from dpaudit.auditing.statistics.ceiling import gaussian_ceiling_band

    band = gaussian_ceiling_band(math.sqrt(100) / 5, trials=900, delta=DELTA)
    return band.ceiling, band.low, band.high


def _simulation_error() -> float:
    """The error of a simulated ceiling: its tail rate near ``1e-4`` rests on ``SIMULATED_DRAWS * 1e-4`` events,
    whose relative error ``1 / sqrt(events)`` moves epsilon by ``log(1 + error)`` (docs/theory.md 6)."""
    # the white-box laws load with the recomputation (see above)
    from dpaudit.mechanisms.accounting.white_box import SIMULATED_DRAWS

    return math.log1p(1 / math.sqrt(SIMULATED_DRAWS * 1e-4))


#: The dp-mf zoo's cases (``audit/checks/zoo/dpmf.py``), each bug beside its twin
DPMF_CASES = tuple(case + twin for case in ("jax-privacy-pr238-sep-sensitivity", "one-participation-claim",
                                            "toeplitz-closed-form-non-monotone", "noise-correlated-by-C",
                                            "reshuffled-epochs") for twin in ("", ":correct"))

#: ``name -> () -> value``: each (a) figure's recomputation
RECOMPUTE: dict[str, Callable[[], float]] = {
    "sgm-pld q=0.01": lambda: _dp_sgd_poisson()[("sgm-pld", "add-remove")],
    "sgm-rdp q=0.01": lambda: _dp_sgd_poisson()[("sgm-rdp", "add-remove")],
    "poisson-as-reported of dp_sgd_shuffle.toml": _dp_sgd_shuffle_as_poisson,
    "laplace scale 2, replace-one": lambda: _claims(_make("laplace", scale=2.0))[("laplace-exact", "replace-one")],
    "gaussian sigma 2, sensitivity 1": lambda: _gaussian(0.5),
    # OpenDP's Gaussian map on a query of sensitivity d_in = 1 at scale 1: rho = (d_in / scale)^2 / 2
    "OpenDP Gaussian scale 1: rho": lambda: (1.0 / 1.0) ** 2 / 2,
    "OpenDP Gaussian scale 1: claim": lambda: _zcdp(0.5),
    "mf-releases tree": lambda: _dp_mf_tree()[("mf-releases", "zero-out")],
    "mf-last-iterate tree": lambda: _dp_mf_tree()[("mf-last-iterate", "zero-out")],
    "tree-rdp tree": lambda: _dp_mf_tree()[("tree-rdp", "zero-out")],
    "jax-privacy keras claim": lambda: _zoo_claims("dp-sgd")["jax-privacy-keras-fixed-batches"][0],
    "jax-privacy keras twin claim": lambda: _zoo_claims("dp-sgd")["jax-privacy-keras-fixed-batches:correct"][0],
    "jax-privacy poisson sampler claim": lambda: _zoo_claims("dp-sgd")["jax-privacy-poisson-sampler"][0],
    "iris sgm-pld": lambda: _model_claim("sgm-pld", q=16 / 150, steps=20),
    "iris sgm-rdp": lambda: _model_claim("sgm-rdp", q=16 / 150, steps=20),
    "iris sgm-pld-replace": lambda: _model_claim("sgm-pld-replace", q=16 / 150, steps=20, relation="replace-one"),
    "cnn sgm-pld": lambda: _model_claim("sgm-pld", q=64 / 1797, steps=50),  # digits: 1,797 records
    "digits ceiling": lambda: _digits_band()[0],
    "digits band low": lambda: _digits_band()[1],
    "digits band high": lambda: _digits_band()[2],
    "simulated ceiling's error": _simulation_error,
    "every 5: exact last iterate": lambda: _scheduled()[0],
    "every 5: every iterate": lambda: _scheduled()[1],
    **{f"dp-mf zoo {case}: {column}": (lambda case=case, i=i: _zoo_claims("dp-mf")[case][i])
       for case in DPMF_CASES for i, column in enumerate(("claim", "true"))
       if (case, column) != ("reshuffled-epochs", "true")},  # a stored Monte Carlo estimate: recorded, not recomputed
}


# -- the registry --------------------------------------------------------------------------------------------
def A(name: str) -> Recomputed:
    """A figure recomputed by ``RECOMPUTE[name]`` (a typo in the registry fails at import)."""
    assert name in RECOMPUTE, name
    return Recomputed(name)


GUIDE, README = "docs/guide.md", "README.md"
ZOO_DPMF, ZOO_DPSGD = "zoo_dp_mf.txt", "zoo_dp_sgd.txt"
ADAPTERS, JAX_BANDMF, IDEAL = "adapters_table.txt", "jax_privacy_bandmf.txt", "ideal_gaussian_pair.txt"
NOISY_MAX = "zoo_blackbox_noisy_max.txt"
DIGITS = "digits_mlp_full_batch.txt"  # the 5-minute audit: its recorded run, not measured again here
OPACUS_TEST = "tests/adapters/test_opacus.py::test_removing_a_record_is_a_certified_violation_of_opacus_own_claim"
RESCALED = "tests/audit/checks/test_zoo_dpsgd.py::test_the_exact_epsilon_of_a_rescaled_noise"
FIXED_TRUE = "tests/audit/checks/test_zoo_dpsgd.py::test_the_opacus_sampling_cases_are_judged_right_at_a_ci_budget"
AUDITS = "tests/package/test_doc_figure_audits.py"


def _dpmf_row(anchor: str, case: str, certified: str, *, claim: str, true: str) -> Line:
    return Line(GUIDE, anchor, ((claim, A(f"dp-mf zoo {case}: claim")), (true, A(f"dp-mf zoo {case}: true")),
                                (certified, Recorded(ZOO_DPMF))))


FIGURES: tuple[Line, ...] = (
    Line(GUIDE, "(pessimistic, through Google's dp-accounting:", (("0.718", A("sgm-pld q=0.01")),)),
    Line(GUIDE, "where RDP gives", (("1.214", A("sgm-rdp q=0.01")),)),
    Line(GUIDE, "plain floats (certified epsilon", (
        ("8.0", AssertedBy(f"{AUDITS}::test_a_naive_float_laplace_is_certified_at_the_guides_figure", "8.0")),)),
    Line(GUIDE, "against a true", (("1.0", A("laplace scale 2, replace-one")),)),
    Line(GUIDE, "This prints `inconclusive", (("7.18", Printed()),)),
    Line(GUIDE, "sensitivity 1 allows epsilon", (("1.99", A("gaussian sigma 2, sensitivity 1")),)),
    Line(GUIDE, "with the `projection` score, below", (
        ("1.11", AssertedBy(f"{AUDITS}::test_the_rounded_sum_certifies_the_guides_figure", "1.11")),
        ("1.99", A("gaussian sigma 2, sensitivity 1")))),
    # the adapters table: OpenDP and python-dp draw their own noise (not reproducible from the seed)
    Line(GUIDE, "`Laplace(epsilon=1)` |", (
        ("1.0", AssertedBy("tests/adapters/test_adapters.py::test_diffprivlib_laplace_float_leak_is_certified_"
                           "above_its_claim", '"diffprivlib-claim") == 1.0')),
        ("0.956", Recorded(ADAPTERS)), ("8.807", Printed()))),
    # the black-box zoo at 10^5: noisy-max-laplace-value missed, caught at 10^6
    Line(GUIDE, "missed and exits 1: its true epsilon,", (
        ("0.25", Recorded(NOISY_MAX, "0.250")), ("0.1", Recorded(NOISY_MAX, "0.100")))),
    Line(GUIDE, "that 95% of audits at the oracle threshold certify between", (
        ("0.152", Recorded(NOISY_MAX)), ("0.251", Recorded(NOISY_MAX)))),
    Line(GUIDE, "vector Laplace, scale 1 |", (
        ("1.0", AssertedBy("tests/adapters/test_adapters.py::test_opendp_vector_laplace_is_consistent_with_its_"
                           "privacy_map", '"opendp-privacy-map") == pytest.approx(1.0)')),
        ("0.972", Recorded(ADAPTERS)), ("0.922", Recorded(ADAPTERS)))),
    Line(GUIDE, "vector Gaussian, scale 1 (zCDP, rho", (
        ("0.5", A("OpenDP Gaussian scale 1: rho")), ("4.728", A("OpenDP Gaussian scale 1: claim")),
        ("2.889", Recorded(ADAPTERS)))),
    Line(GUIDE, "`BoundedSum(epsilon=1)` over [0, 1] |", (
        ("1.0", AssertedBy("tests/adapters/test_adapters.py::test_pydp_bounded_sum_against_its_claim",
                           '"python-dp-claim") == 1.0')),
        ("0.982", Recorded(ADAPTERS)), ("0.837", Recorded(ADAPTERS)))),
    # Opacus and the DP-SGD zoo
    Line(GUIDE, "The engine reports", (("4.582", AssertedBy(OPACUS_TEST, "4.582")),)),
    Line(GUIDE, "The same training on 11 records against 10", (("57.1", AssertedBy(RESCALED, "57.131")),)),
    Line(GUIDE, "| `opacus-cardinality` (opacus 571, 819)", (
        ("4.582", AssertedBy(OPACUS_TEST, "4.582")), ("57.13", AssertedBy(RESCALED, "57.131")),
        ("5.418", Recorded(ZOO_DPSGD)))),
    Line(GUIDE, "| its twin: 11 against 10 records |", (
        ("4.582", AssertedBy(OPACUS_TEST, "4.582")), ("0.000", Recorded(ZOO_DPSGD)))),
    Line(GUIDE, "| `opacus-fixed-batches` (opacus 80, PR 128)", (
        ("2.426", AssertedBy(f"{AUDITS}::test_the_opacus_engines_claims_are_the_guides", "2.426")),
        ("7.00", AssertedBy(FIXED_TRUE, "6.999")), ("2.476", Recorded(ZOO_DPSGD)))),
    Line(GUIDE, "| its twin: `poisson_sampling=True` |", (
        ("2.426", AssertedBy(f"{AUDITS}::test_the_opacus_engines_claims_are_the_guides", "2.426")),
        ("0.154", Recorded(ZOO_DPSGD)))),
    Line(GUIDE, "| `opacus-weighted-sampler` (opacus 813)", (
        ("0.994", AssertedBy(f"{AUDITS}::test_the_opacus_engines_claims_are_the_guides", "0.994")),
        ("5.424", Recorded(ZOO_DPSGD)))),
    Line(GUIDE, "| its twin: `poisson_sampling=True` (Opacus replaces the sampler)", (
        ("0.994", AssertedBy(f"{AUDITS}::test_the_opacus_engines_claims_are_the_guides", "0.994")),
        ("0.023", Recorded(ZOO_DPSGD)))),
    Line(GUIDE, "| `jax-privacy-keras-fixed-batches` (jax_privacy 84)", (
        ("0.718", A("jax-privacy keras claim")), ("0.781", Recorded(ZOO_DPSGD)))),
    Line(GUIDE, "| its twin: `poisson_sampling_in_fit=True` |", (
        ("0.718", A("jax-privacy keras twin claim")), ("0.072", Recorded(ZOO_DPSGD)))),
    Line(GUIDE, "| `jax-privacy-poisson-sampler` (jax_privacy 121)", (
        ("0.718", A("jax-privacy poisson sampler claim")), ("0.127", Recorded(ZOO_DPSGD)))),
    Line(GUIDE, "The true epsilon of the fixed-batch cases on these pairs:", (
        ("7.00", AssertedBy(FIXED_TRUE, "6.999")),)),
    # dp-mf
    Line(GUIDE, "prints, among others, `mf-releases`", (("4.98", A("mf-releases tree")),
                                                       ("1.99", A("mf-last-iterate tree")))),
    Line(GUIDE, "(zero-out). An audit's default canary", (("5.38", A("tree-rdp tree")),)),
    _dpmf_row("| `jax-privacy-pr238-sep-sensitivity` (PR 238)", "jax-privacy-pr238-sep-sensitivity", "2.798",
              claim="2.129", true="7.053"),
    _dpmf_row("| its twin: `n` given |", "jax-privacy-pr238-sep-sensitivity:correct", "4.263",
              claim="7.053", true="7.053"),
    _dpmf_row("| `one-participation-claim`:", "one-participation-claim", "2.408", claim="2.252", true="6.973"),
    _dpmf_row("| its twin: the 4-participation value |", "one-participation-claim:correct", "4.103",
              claim="6.973", true="6.973"),
    _dpmf_row("| `toeplitz-closed-form-non-monotone` (review", "toeplitz-closed-form-non-monotone", "2.545",
              claim="2.396", true="6.901"),
    _dpmf_row("| its twin: the exact cyclic value |", "toeplitz-closed-form-non-monotone:correct", "3.882",
              claim="6.901", true="6.901"),
    _dpmf_row("| `noise-correlated-by-C`:", "noise-correlated-by-C", "2.623", claim="2.576", true="6.157"),
    _dpmf_row("| its twin: noise `C^{-1} z` |", "noise-correlated-by-C:correct", "1.334", claim="2.576",
              true="2.576"),
    # the reshuffled case's true value is a stored Monte Carlo estimate (audit/checks/zoo/dpmf.py), not recomputed
    Line(GUIDE, "| `reshuffled-epochs`: batches reshuffled", (
        ("4.377", A("dp-mf zoo reshuffled-epochs: claim")), ("3.774", Recorded(ZOO_DPMF)),
        ("0.016", Recorded(ZOO_DPMF)), ("1.932", Recorded(ZOO_DPMF)))),
    _dpmf_row("| its twin: cyclic order |", "reshuffled-epochs:correct", "2.869", claim="4.377", true="4.377"),
    Line(GUIDE, "jax_privacy claims", (("6.573", Recorded(JAX_BANDMF, "6.5730")),)),
    Line(GUIDE, "with a squared loss and", (
        ("1.78", Recorded(JAX_BANDMF, "1.782")), ("2.32", Recorded(JAX_BANDMF, "2.317")))),
    Line(GUIDE, "whose last iterate is exactly", (("3.948", Recorded(JAX_BANDMF, "3.9481")),)),
    Line(GUIDE, "(10^5 trials per side; `python examples/jax_privacy_bandmf.py`", (
        ("2.68", Recorded(JAX_BANDMF, "2.684")),)),
    # the neighbour search, reading a report
    Line(GUIDE, "against a claim of 1 (`tests/audit/checks/test_search_records.py`)", (
        ("4.48", AssertedBy(f"{AUDITS}::test_the_float_sum_search_certifies_the_guides_figure", "4.48")),)),
    Line(GUIDE, "it then carries the simulation's error, about", (("0.1", A("simulated ceiling's error")),)),
    # models
    Line(GUIDE, "lifts the logistic example from", (("2.69", Recorded("dp_sgd_logistic.txt", "2.688")),
                                                    ("2.95", Recorded("dp_sgd_logistic.txt", "2.946")))),
    Line(GUIDE, "It prints `consistent", (("0.147", Printed()),)),
    Line(GUIDE, "DP-SGD for add/remove (`sgm-pld`", (("3.798", A("iris sgm-pld")), ("4.451", A("iris sgm-rdp")))),
    Line(GUIDE, "bounds a replaced record); 1,000 trials", (("4.890", A("iris sgm-pld-replace")),)),
    Line(GUIDE, "on the 2 CPU cores): white box", (
        ("3.70", Recorded(DIGITS, "3.7041")), ("2.83", Recorded(DIGITS, "2.8321")))),
    Line(GUIDE, "of the composition's law; GDP", (
        ("2.67", A("digits band low")), ("3.94", A("digits band high")), ("3.40", A("digits ceiling")))),
    Line(GUIDE, "against the claim's 2. The canary is as good", (
        ("1.74", Recorded(DIGITS, "1.7449")), ("1.84", Recorded(DIGITS, "1.8425")))),
    Line(GUIDE, "and these trials that placement certifies a median of", (("3.39", Recorded(IDEAL, "3.3877")),)),
    Line(GUIDE, "the ideal test behind the", (
        ("2.99", Recorded(IDEAL, "2.9852")), ("3.94", Recorded(IDEAL, "3.9448")), ("3.0", Recorded(IDEAL, "3.0: 88%")))),
    Line(GUIDE, "certifies less, a median of", (
        ("2.72", Recorded(IDEAL, "2.7177")), ("2.24", Recorded(IDEAL, "2.2426")), ("3.15", Recorded(IDEAL, "3.1539")))),
    Line(GUIDE, "do not reach the tail where the", (("3.0", Recorded(IDEAL, "3.0: 22%")),)),
    Line(GUIDE, "second run (`seed = 1`) certified", (
        ("3.78", Recorded(DIGITS, "3.7809")), ("2.67", Recorded(DIGITS, "2.674992033153752")))),
    Line(GUIDE, "counts' test certified", (("2.96", Recorded(DIGITS, "white box 2.96")),)),
    Line(GUIDE, "It prints `projection consistent", (
        ("2.68", Printed()), ("2.22", Printed()), ("3.52", Printed()))),
    Line(GUIDE, "500 trials per side certify a median of", (("2.35", Recorded(IDEAL, "2.3506")),)),
    Line(GUIDE, "(the CNN example, claim", (
        ("1.95", A("cnn sgm-pld")), ("0.17", Recorded("cnn_one_run_plan.txt", "0.166")))),
    Line(GUIDE, "on average over 40 seeds (", (
        ("0.163", Recorded("cnn_one_run.txt", "0.1628")), ("0.178", Recorded("cnn_one_run_canaries.txt")),
        ("0.104", Recorded("cnn_one_run_canaries.txt")))),
    Line(GUIDE, "against the Poisson claim of", (("0.718", A("poisson-as-reported of dp_sgd_shuffle.toml")),)),
    Line(GUIDE, "for every iterate (docs/theory.md", (
        ("0.726", A("every 5: exact last iterate")), ("1.760", A("every 5: every iterate")))),
)
