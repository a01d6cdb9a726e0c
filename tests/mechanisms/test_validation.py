"""Bad parameters fail at construction with a message naming parameter and value."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dpaudit import mechanisms
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms import Dataset, make
from dpaudit.mechanisms.registry import register

#: the rest of a positive real parameter's rule (mechanisms.base.Mechanism._real_rule)
WHOLE = "and between 1e-100 and 1e+100 (an audit's float64 arithmetic overflows beyond)"


@pytest.mark.parametrize("name, params, message", [
    ("pnsgd", {"sigma": -1.0}, f"sigma must be > 0 {WHOLE}, got sigma=-1.0"),
    ("pnsgd", {"eta": 0}, f"eta must be > 0 {WHOLE}, got eta=0.0"),
    ("pnsgd", {"n": 0}, "n must be >= 1, got n=0"),
    ("pnsgd", {"n": 2.5}, "n must be an integer, got n=2.5"),
    ("pnsgd", {"variant": "fast"}, "variant must be one of 'plain', 'skip', 'stop', got variant='fast'"),
    ("pnsgd", {"loss": "hinge"}, "loss must be one of"),
    ("pnsgd", {"domain": "sphere"}, "domain must be one of 'ball', 'box', 'whole', got domain='sphere'"),
    ("pnsgd", {"domain": "box", "low": 1.0, "high": 0.0}, "low must be < high, got low=1.0, high=0.0"),
    ("pnsgd", {"radius": float("nan")}, "radius must be finite, got radius=nan"),
    ("pnsgd", {"noise": "laplace"}, "noise='laplace' needs scale, got scale=None"),
    ("pnsgd", {"init": [2.0]}, "init must lie in K, got init=[2.0]"),
    ("pnsgd", {"init": [0.0, 0.0]}, "init must be 'center', 'boundary' or 1 finite numbers"),
    ("pnsgd", {"domain": "whole", "init": "boundary"}, "init='boundary' needs a bounded domain"),
    ("pnsgd", {"dtype": "float16"}, "dtype must be one of 'float32', 'float64', got dtype='float16'"),
    ("multi-epoch-pnsgd", {"variant": "stop"}, "supports variant='plain' only, got variant='stop'"),
    ("projected-kernel", {"step": "contraction"}, "needs contraction in [0, 1), got contraction=1.0"),
    ("projected-kernel", {"contraction": 1.5}, "contraction must be <= 1.0, got contraction=1.5"),
    ("dp-sgd", {"n": 5, "batch_size": 6}, "batch_size must be <= n=5, got batch_size=6"),
    ("dp-sgd", {"sampling": "shuffled"}, "sampling must be one of"),
    ("dp-lssgd", {"smoothing": -0.5}, "smoothing must be 0 or between 1e-100 and 1e+100 (an audit's float64 "
                                      "arithmetic overflows beyond), got smoothing=-0.5"),
    ("shuffled-rr", {"epsilon0": 0.0}, f"epsilon0 must be > 0 {WHOLE}, got epsilon0=0.0"),
    ("gaussian", {"sigma": True}, "sigma must be a real number, got sigma=True"),
    ("laplace", {"scale": "1"}, "scale must be a real number, got scale='1'"),
])
def test_bad_parameters_name_the_value(name, params, message):
    with pytest.raises(ParameterError) as info:
        make(name, **params)
    assert message in str(info.value)


def test_parameter_error_is_a_value_error():
    assert issubclass(ParameterError, ValueError)


def test_unknown_mechanism_lists_the_valid_names():
    with pytest.raises(ParameterError, match="mechanism must be one of .*'pnsgd'.*got mechanism='pnsg'"):
        make("pnsg")


def test_unknown_parameter_lists_the_valid_ones():
    with pytest.raises(ParameterError, match="unknown parameter 'sigm' for mechanism 'pnsgd'; valid parameters: .*sigma"):
        make("pnsgd", sigm=1.0)


@pytest.mark.parametrize("dataset, message", [
    (np.zeros((4, 1)), "dataset must have n=5 records for pnsgd, got 4"),
    (np.zeros((5, 2)), "dataset records must have 1 columns for pnsgd, got dataset shape (5, 2)"),
    (np.full((5, 1), np.nan), "dataset records must be finite"),
    (np.zeros((0, 1)), "dataset must be a non-empty 2-D array"),
    (Dataset(np.zeros((5, 1))).inject(9, [1.0]), "injected gradient position must be in 1..5, got position=9"),
    (Dataset(np.zeros((5, 1))).inject(2, [1.0, 2.0]), "injected gradient at position 2 must be 1 finite numbers"),
])
def test_bad_datasets(dataset, message):
    with pytest.raises(ParameterError) as info:
        make("pnsgd", n=5).sample(dataset, trials=2, seed=0)
    assert message in str(info.value)


@pytest.mark.parametrize("trials, seed, message", [
    (0, 0, "trials must be >= 1, got trials=0"),
    (2, -1, "seed must be >= 0, got seed=-1"),
    (2, "a", "seed must be a non-negative int or numpy.random.SeedSequence, got seed='a'"),
])
def test_bad_trials_and_seeds(trials, seed, message):
    with pytest.raises(ParameterError) as info:
        make("gaussian").sample(trials=trials, seed=seed)
    assert message in str(info.value)


def test_shuffled_rr_needs_bits():
    with pytest.raises(ParameterError, match="must be bits 0 or 1"):
        make("shuffled-rr", n=2).sample([[0.0], [0.5]], trials=1, seed=0)


def test_registry_refuses_duplicate_names():
    @dataclasses.dataclass(frozen=True)
    class Impostor(mechanisms.registered()["gaussian"]):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register(Impostor)


def test_mechanisms_are_frozen():
    mech = make("pnsgd")
    with pytest.raises(dataclasses.FrozenInstanceError):
        mech.sigma = 2.0  # type: ignore[misc]


def test_callable_output_length_is_checked():
    mech = mechanisms.from_callable(lambda data, rng: [1.0, 2.0], 1)
    with pytest.raises(ParameterError, match="fn must return 1 numbers per call, got shape"):
        mech.sample(np.zeros((2, 1)), trials=1, seed=0)
