"""Misbehaving user code is refused before any certification, in dpaudit's own one-line errors (issue 72).

A plain function where a mechanism belongs, a function wrapped with ``from_callable`` that cannot be called as
documented or returns no numbers, NaN partway through an audit, a float64 model given to ``from_opacus``, and a
library release outside an adapter's supported range: each is refused (or, for the model, followed) at the
latest in the first chunk, with a message that names the argument. Each user function counts its calls, so the
tests see how much ran before the refusal.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

import dpaudit
from dpaudit.auditing.jobs.job import make_job
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.base import make_rng
from dpaudit.mechanisms.wrapped import CallableMechanism

ROOT = Path(__file__).resolve().parents[2]
PAIR = (np.zeros((4, 1)), np.r_[np.zeros((3, 1)), np.ones((1, 1))])


class Counted:
    """A user function ``fn(records, rng)`` returning ``value(call, rng)``, counting its calls."""

    def __init__(self, value):
        self.value, self.calls = value, 0

    def __call__(self, records, rng):
        self.calls += 1
        return self.value(self.calls, rng)


def _one_line(caught: pytest.ExceptionInfo) -> str:
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- the mechanism argument -----------------------------------------------------------------------------
@pytest.mark.parametrize("given, shown, remedy", [
    ("function", "the function 'Counted'", "wrap a function with dpaudit.from_callable(fn, output_dim=...)"),
    (CallableMechanism, "the class CallableMechanism", "pass an instance, CallableMechanism(...)"),
    ("gaussian", "the string 'gaussian'", "build one with dpaudit.make('gaussian', ...)"),
    (3.0, "mechanism=3.0 (float)", "a function wrapped with dpaudit.from_callable"),
])
def test_audit_refuses_what_is_not_a_mechanism_naming_it_and_how_to_wrap_a_function(given, shown, remedy):
    fn = Counted(lambda call, rng: [rng.normal()])
    given = fn if given == "function" else given
    with pytest.raises(ParameterError) as caught:
        dpaudit.audit(given, dataset_pair=PAIR, trials=2_000)
    message = _one_line(caught)
    assert message.startswith("mechanism must be a dpaudit Mechanism") and shown in message and remedy in message
    with pytest.raises(ParameterError, match="^mechanism must be a dpaudit Mechanism"):
        make_job(given)  # the default canary would read the mechanism's records first
    with pytest.raises(ParameterError, match="^mechanism must be a dpaudit Mechanism"):
        dpaudit.search(given, record_domain=(0.0, 1.0))
    assert fn.calls == 0


# -- from_callable: how fn is called and what it returns ------------------------------------------------
def test_from_callable_refuses_a_function_of_the_wrong_signature_before_calling_it():
    calls = []

    def one_argument(records):
        calls.append(1)
        return [0.0]

    with pytest.raises(ParameterError) as caught:
        dpaudit.from_callable(one_argument, output_dim=1)
    assert _one_line(caught) == ("fn must be callable as fn(records, rng) with the records array and a "
                                 "numpy.random.Generator, got test_from_callable_refuses_a_function_of_the_wrong_"
                                 "signature_before_calling_it.<locals>.one_argument(records) (too many positional "
                                 "arguments)")
    with pytest.raises(ParameterError, match=r"got \S*<lambda>\(records, rng, \*, scale\) \(missing a required "
                                             r"argument: 'scale'\)$"):
        dpaudit.from_callable(lambda records, rng, *, scale: [scale], output_dim=1)
    with pytest.raises(ParameterError, match=r"^fn must be callable as fn\(records, rng, trials\) .*got "
                                             r"\S*<lambda>\(records, rng\) \(too many positional arguments\)$"):
        dpaudit.from_batched_callable(lambda records, rng: np.zeros((1, 1)), output_dim=1)
    assert calls == []
    # defaults, *args and callable objects bind as documented
    dpaudit.from_callable(lambda records, rng, scale=1.0: [scale], output_dim=1)
    dpaudit.from_callable(lambda *args: [0.0], output_dim=1)
    dpaudit.from_callable(Counted(lambda call, rng: [0.0]), output_dim=1)


@pytest.mark.parametrize("value, shown", [
    ("0.5", "got the str '0.5'"),
    (["a", "b"], "got strings (a list of dtype <U1)"),
    (None, "got None"),
    ([object()], "got a list holding object objects"),
    ([1 + 2j], "got complex numbers (a list of dtype complex128)"),
    ({"mean": 0.0}, "got a dict"),
])
def test_from_callable_refuses_outputs_that_are_not_numbers_at_the_first_call(value, shown):
    fn = Counted(lambda call, rng: value)
    mech = dpaudit.from_callable(fn, output_dim=1)
    with pytest.raises(ParameterError) as caught:
        dpaudit.audit(mech, dataset_pair=PAIR, trials=2_000)
    assert _one_line(caught) == f"fn must return 1 numbers per call (output_dim=1), {shown} at its first call"
    assert fn.calls == 1


def test_from_callable_refuses_a_shape_off_the_declared_dim_or_changing_between_calls():
    wide = Counted(lambda call, rng: [rng.normal(), 0.0])
    with pytest.raises(ParameterError) as caught:
        dpaudit.audit(dpaudit.from_callable(wide, output_dim=1), dataset_pair=PAIR, trials=2_000)
    assert _one_line(caught) == "fn must return 1 numbers per call, got shape (2,) at its first call (output_dim=1)"
    assert wide.calls == 1
    changing = Counted(lambda call, rng: [rng.normal()] if call < 5 else [[rng.normal()]])
    with pytest.raises(ParameterError) as caught:
        dpaudit.audit(dpaudit.from_callable(changing, output_dim=1), dataset_pair=PAIR, trials=2_000)
    assert _one_line(caught) == ("fn must return the same shape at every call, got (1,) at the first call and "
                                 "(1, 1) at call 5")
    assert changing.calls == 5
    batched = dpaudit.from_batched_callable(lambda records, rng, trials: [["x"]] * trials, output_dim=1)
    with pytest.raises(ParameterError, match=r"^fn must return an array of shape \(trials, 1\), got strings"):
        batched.sample(PAIR[0], trials=3, seed=0)


def test_a_correct_function_samples_exactly_what_it_sampled_before():
    """The checks read each output; they draw nothing: the same seed gives the loop's own values."""
    def fn(records, rng):
        return [records.sum() + rng.normal(), rng.laplace()]

    mech = dpaudit.from_callable(fn, output_dim=2)
    seed = np.random.SeedSequence(7, spawn_key=(0, 1, 1, 3))  # a runner's chunk seed
    rng = make_rng(seed)
    expected = np.array([np.asarray(fn(PAIR[1], rng), dtype=np.float64) for _ in range(50)])  # the loop before
    np.testing.assert_array_equal(mech.sample(PAIR[1], trials=50, seed=seed), expected)
    ints = dpaudit.from_callable(lambda records, rng: int(rng.integers(10)), output_dim=1)  # a scalar int
    np.testing.assert_array_equal(ints.sample(PAIR[0], trials=20, seed=1)[:, 0], make_rng(1).integers(10, size=20))


# -- non-finite releases --------------------------------------------------------------------------------
def test_nan_partway_is_refused_at_the_first_chunk_with_the_seed_that_draws_it_again():
    fn = Counted(lambda call, rng: [np.nan if rng.random() < 0.02 else rng.normal()])
    mech = dpaudit.from_callable(fn, output_dim=1, name="noisy_mean")
    with pytest.raises(ParameterError) as caught:
        dpaudit.audit(mech, dataset_pair=PAIR, trials=20_000, chunk_size=1_000, seed=5)
    message = _one_line(caught)
    assert message.startswith("mechanism 'noisy_mean' released NaN in trial ")
    assert message.endswith("refused before any certification")
    found = re.search(r"in trial (\d+) of (\d+) of the calibration chunk 0 of dataset a \(draw it again with "
                      r"mechanism.sample\(dataset_a, trials=(\d+), seed=numpy.random.SeedSequence\((\d+), "
                      r"spawn_key=\((\d+), (\d+), (\d+), (\d+)\)\)\)\[(\d+)\]\)", message)
    assert found, message
    trial, trials, again, root, *spawn, row = (int(v) for v in found.groups())
    assert fn.calls == trials == again and row == trial - 1 and root == 5  # one chunk ran, of calibration
    drawn = mech.sample(PAIR[0], trials=trials, seed=np.random.SeedSequence(root, spawn_key=tuple(spawn)))
    assert np.isnan(drawn[row, 0]) and not np.isnan(drawn[:row]).any()


def test_infinite_releases_are_refused_where_the_score_cannot_read_them():
    def sometimes_infinite(records, rng):
        value = records.sum() + rng.normal()
        return [np.inf if value > 3.5 else value]

    mech = dpaudit.from_callable(sometimes_infinite, output_dim=1, seeded=False)
    with pytest.raises(ParameterError) as caught:
        dpaudit.audit(mech, dataset_pair=PAIR, score="projection", trials=4_000, chunk_size=1_000)
    message = _one_line(caught)
    assert re.match(r"mechanism 'test_infinite_releases_are_refused_where_the_score_cannot_read_them.<locals>."
                    r"sometimes_infinite' released inf that score inf \(certification needs finite scores\) in "
                    r"trial \d+ of \d+ of the calibration chunk 0 of dataset b \(its randomness is not seeded: a "
                    r"rerun draws other trials\); refused before any certification$", message), message
    # float-bits reads an infinity's bits like any other value's: the audit runs
    assert dpaudit.audit(mech, dataset_pair=PAIR, score="float-bits", trials=4_000).verdict == "inconclusive"


# -- from_opacus follows the model's dtype --------------------------------------------------------------
def test_from_opacus_trains_a_float64_model_on_float64_records():
    pytest.importorskip("opacus", reason="Opacus is an optional extra: pip install 'dpaudit[models]'")
    import torch

    from dpaudit.mechanisms.adapters import from_opacus

    records = np.random.default_rng(0).normal(size=(8, 2))
    runs = {}
    for dtype in (torch.float64, torch.float32):
        model = torch.nn.Linear(2, 1).to(dtype)
        torch.nn.init.zeros_(model.weight), torch.nn.init.zeros_(model.bias)
        training = from_opacus(model, records=records, batch_size=4, noise_multiplier=1.0)
        runs[dtype] = training.sample(records, trials=2, seed=0)
        assert runs[dtype].shape == (2, 3) and np.isfinite(runs[dtype]).all()
    # the same training in both precisions: the noise and the batches are seeded alike
    np.testing.assert_allclose(runs[torch.float64], runs[torch.float32], rtol=1e-4, atol=1e-5)


# -- the library releases each adapter supports ---------------------------------------------------------
def _installed_as(monkeypatch, fake: dict[str, str]) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: fake.get(name) or real(name))


def test_opendp_0_5_is_refused_naming_the_installed_version_and_the_range(monkeypatch):
    pytest.importorskip("opendp")
    from dpaudit.mechanisms.adapters import from_opendp

    _installed_as(monkeypatch, {"opendp": "0.5.0"})
    with pytest.raises(ParameterError) as caught:
        from_opendp(object())  # refused before the measurement is read (0.5 has no input_metric)
    assert _one_line(caught) == ("from_opendp supports opendp >=0.13, got opendp 0.5.0 installed: pip install "
                                 "'opendp>=0.13', or audit this release through dpaudit.from_callable "
                                 "(docs/guide.md, \"Older library releases\")")


def test_diffprivlib_0_3_is_refused_naming_the_installed_version_and_the_range(monkeypatch):
    pytest.importorskip("diffprivlib")
    from dpaudit.mechanisms.adapters import from_diffprivlib

    _installed_as(monkeypatch, {"diffprivlib": "0.3.0"})
    with pytest.raises(ParameterError) as caught:
        from_diffprivlib(object())  # not "must be a numeric diffprivlib mechanism with a sensitivity"
    assert _one_line(caught).startswith("from_diffprivlib supports diffprivlib >=0.6, got diffprivlib 0.3.0 "
                                        "installed: pip install 'diffprivlib>=0.6', or audit this release "
                                        "through dpaudit.from_callable")
    assert "Older library releases" in (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("version, supported, inside", [
    ("0.16.0", ">=0.13", True), ("0.13", ">=0.13", True), ("0.13.0rc1", ">=0.13", False), ("0.5.0", ">=0.13", False),
    ("2.0.3", ">=2.0,<2.1", True), ("2.1.0", ">=2.0,<2.1", False), ("2.1.0rc1", ">=2.0,<2.1", False),
    ("2.13.0+cpu", ">=2.13", True), ("1.1.3", ">=1.1.4", False), ("unknown", ">=1", True),
])
def test_version_ranges_compare_release_numbers(version, supported, inside):
    from dpaudit.mechanisms.adapters.base import version_supported

    assert version_supported(version, supported) is inside


def test_each_adapter_supports_from_the_floor_the_package_declares():
    """The floors of the ``libraries`` extra (the versions the suite runs on) are the adapters' floors."""
    from dpaudit.mechanisms.adapters import diffprivlib, opacus, opendp, pydp

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    floors = dict(re.match(r"([\w-]+)>=([\d.]+)", requirement).groups() for requirement in extra["libraries"])
    declared = {"diffprivlib": diffprivlib, "opendp": opendp, "python-dp": pydp, "opacus": opacus}
    for name, module in declared.items():
        assert module.SUPPORTED_VERSIONS.split(",")[0] == f">={floors[name]}", name
