"""The exact accountant: closed forms, convergence, speed, and the exact likelihood-ratio audit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.auditing.jobs.api import audit
from dpaudit.mechanisms.accounting.exact1d import Step, exact_profile, rounding_bound
from dpaudit.auditing.statistics.ceiling import exact_ceiling
from dpaudit.mechanisms.accounting.instances import (
    NotExact,
    exact_epsilon,
    exact_laws,
    instance_steps,
    likelihood_ratio_law,
)
from dpaudit.mechanisms.accounting.profiles import gaussian_delta, laplace_delta

EPS = np.array([0.0, 0.5, 1.0, 2.0, 4.0])


def reset_instance(n=20, t=5, s=0.5, u=1.0):
    def steps(sign):
        return ([Step(0.0, 1.0, s)] * (t - 1) + [Step(sign * u, 0.0, s)] + [Step(0.0, 1.0, s)] * (n - t))
    return steps(1), steps(-1), 2 * u / (s * math.sqrt(n - t + 1))


def translation_instance():
    steps_a = [Step(0.2, 1.0, 0.5)] + [Step(0.0, 1.0, 0.5)] * 9
    steps_b = [Step(-0.2, 1.0, 0.5)] + [Step(0.0, 1.0, 0.5)] * 9
    return steps_a, steps_b, 0.4 / (0.5 * math.sqrt(10))


def test_whole_line_matches_the_gaussian_closed_form_within_the_stated_bound():
    # the tolerance is the engine's stated bound, |delta_N - delta| <= grid_error + rounding_bound
    # (docs/theory.md 5.2), not a fixed number: it was 1e-6, and numpy 2.5/scipy 1.18 gave 1.8e-6
    # through an E_gamma cell counted twice (fixed)
    for (a, b, mu), cells in ((reset_instance(), 8192), (translation_instance(), 4096)):
        result = exact_profile(a, b, EPS, cells=cells)
        error = np.abs(result["delta"] - gaussian_delta(EPS, mu))
        assert np.all(error <= result["grid_error"] + rounding_bound(len(a), cells, EPS))
        assert np.max(result["grid_error"]) < 2e-6  # and the bound is small at these grids


def _numpy_fftconvolve(first, second):
    """Full linear convolution through numpy's FFT on a power-of-two length: another FFT, other roundings."""
    size = first.size + second.size - 1
    length = 1 << (size - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(first, length) * np.fft.rfft(second, length), length)[:size]


@pytest.mark.parametrize("fft", ["scipy", "numpy"])
def test_the_engine_is_within_its_bound_on_either_fft_path(fft, monkeypatch):
    from dpaudit.mechanisms.accounting import exact1d

    if fft == "numpy":
        monkeypatch.setattr(exact1d, "_fftconvolve", _numpy_fftconvolve)
    a, b, mu = reset_instance()
    result = exact_profile(a, b, EPS, cells=4096)
    rounding = rounding_bound(len(a), 4096, EPS)
    assert np.all(np.abs(result["delta"] - gaussian_delta(EPS, mu)) <= result["grid_error"] + rounding)
    monkeypatch.undo()
    reference = exact_profile(a, b, EPS, cells=4096)
    # the two FFT paths differ by rounding alone (about 1e-14), inside twice the floating-point part
    assert np.all(np.abs(result["delta"] - reference["delta"]) <= 2 * rounding)
    assert np.all(np.abs(result["grid_error"] - reference["grid_error"]) <= 4 * rounding)


def test_e_gamma_does_not_depend_on_an_exact_zero_at_a_node():
    # p - q exactly 0 at a node (symmetric laws, one FFT's rounding) or a few ulps either side (another's):
    # E_gamma moves by rounding only. It used to count the cell beside the zero twice (h * slope * h / 2).
    from dpaudit.mechanisms.accounting.exact1d import Law, e_gamma

    nodes = np.linspace(-10.0, 10.0, 4097)
    p = np.exp(-0.5 * (nodes - 0.5) ** 2) / math.sqrt(2 * math.pi)
    q = p[::-1].copy()
    centre = nodes.size // 2
    assert p[centre] == q[centre]
    values = []
    for nudge in (0.0, 1e-18, -1e-18):
        shifted = p.copy()
        shifted[centre] += nudge
        values.append(e_gamma(Law(nodes, shifted, {}), Law(nodes, q, {}), 1.0))
    exact = float(gaussian_delta(0.0, 1.0))  # delta(0) is the total variation of N(.5, 1) and N(-.5, 1)
    assert max(values) - min(values) <= 1e-15
    assert abs(values[0] - exact) <= 1e-5  # the trapezoid rule's error at h = 0.005, far above rounding


def test_refining_the_grid_converges_and_the_error_estimate_bounds_the_error():
    a, b, mu = reset_instance()
    errors = []
    for cells in (4096, 8192, 16384):
        result = exact_profile(a, b, EPS, cells=cells)
        error = np.abs(result["delta"] - gaussian_delta(EPS, mu))
        # the reported estimate is conservative here, at every epsilon (docs/theory.md 5.2)
        assert np.all(error <= result["grid_error"] + rounding_bound(len(a), cells, EPS))
        errors.append(np.max(error))
    assert errors[1] < errors[0] / 3 and errors[2] < errors[1] / 3  # second order


def _contraction_instance(noise: str):
    """Four contraction steps (rho = 0.5) on K = [-1, 1] with the canary at the second step."""
    steps_a = [Step(0.0, 0.5, 0.3)] * 4
    steps_b = [Step(0.0, 0.5, 0.3), Step(0.3, 0.5, 0.3), Step(0.0, 0.5, 0.3), Step(0.0, 0.5, 0.3)]
    return steps_a, steps_b, dict(noise=noise, low=-1.0, high=1.0)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_contraction_steps_conserve_mass_and_converge_to_second_order(noise):
    from dpaudit.mechanisms.accounting.exact1d import _run

    a, b, options = _contraction_instance(noise)
    p, q = _run(a, b, start=0.0, cells=4096, stop=False, **options)
    assert abs(p.mass - 1) < 1e-9 and abs(q.mass - 1) < 1e-9
    grid = [0.1, 0.3, 0.6]
    reference = exact_profile(a, b, grid, cells=65536, **options)["delta"]
    errors = [np.max(np.abs(exact_profile(a, b, grid, cells=c, **options)["delta"] - reference))
              for c in (1024, 2048, 4096)]
    assert errors[1] < errors[0] / 3 and errors[2] < errors[1] / 3  # halving h divides the error by ~4
    # the reported grid error is never smaller than the error against a grid four times finer
    for cells in (1024, 4096):
        result = exact_profile(a, b, grid, cells=cells, **options)
        finer = exact_profile(a, b, grid, cells=4 * cells, **options)["delta"]
        assert np.all(result["grid_error"] >= np.abs(result["delta"] - finer))


def test_laplace_matches_its_closed_form():
    result = exact_profile([Step(1.0, 1.0, 1.0)], [Step(-1.0, 1.0, 1.0)], [0.0, 0.5, 1.0, 1.5],
                           noise="laplace", cells=8192)
    np.testing.assert_allclose(result["delta"], laplace_delta(np.array([0.0, 0.5, 1.0, 1.5]), 2.0), atol=5e-5)


def test_theory_example():
    # docs/theory.md 5: n = 20, eta = 0.1, sigma = 2, L = 1, K = [0, 1], canary at the last index:
    # the exact delta(1) is about 9e-3 (Thm 4 gives 0.127)
    def steps(sign, n):
        return [Step(0.0, 1.0, 0.2)] * (n - 1) + [Step(-0.1 * sign, 1.0, 0.2)]
    result = exact_profile(steps(1, 20), steps(-1, 20), [1.0], low=0.0, high=1.0, start=0.5)
    assert result["delta"][0] == pytest.approx(9.07e-3, abs=1e-4)


def test_work_is_a_fixed_number_of_grid_sized_convolutions(monkeypatch):
    # the work, not the seconds (docs/theory.md 5): each step of each law costs two FFT convolutions
    # of grid-sized arrays, on the grid and on the half grid, whatever the number of epsilons
    from dpaudit.mechanisms.accounting import exact1d

    sizes = []
    real = exact1d._fftconvolve

    def counted(first, second):
        sizes.append(first.size + second.size)
        return real(first, second)

    monkeypatch.setattr(exact1d, "_fftconvolve", counted)

    def steps(sign, n):
        return [Step(0.0, 1.0, 0.2)] * (n - 1) + [Step(-0.1 * sign, 1.0, 0.2)]

    exact_profile(steps(1, 100), steps(-1, 100), np.linspace(0, 3, 25), low=0.0, high=1.0, start=0.5, cells=4096)
    assert len(sizes) == 2 * 100 * 2 * 2  # laws x steps x convolutions x grids
    assert max(sizes) <= 3 * (4096 + 1)


def test_instances_from_mechanisms():
    mech = mechanisms.make("pnsgd", n=20, dim=1, eta=0.1, sigma=2.0, domain="box", low=0.0, high=1.0, init=[0.5])
    pair = CanarySpec(kind="gradient").build(mech, 20)
    assert exact_epsilon(mech, pair.dataset_a, pair.dataset_b, 1e-5) == pytest.approx(1.050, abs=0.01)
    with pytest.raises(NotExact, match="one-dimensional"):
        instance_steps(mechanisms.make("pnsgd", dim=2), pair.dataset_a)
    with pytest.raises(NotExact, match="non-affine"):
        instance_steps(mechanisms.make("pnsgd", n=20, dim=1, loss="logistic"), mechanisms.Dataset(np.zeros((20, 2))))


def test_exact_epsilon_is_the_root_even_at_an_atom_kink():
    # on K = [0, 1] the output has atoms at 0 and 1; delta(eps) has a kink where the atom term
    # P_A({0}) - e^eps P_B({0}) reaches zero (eps = log 4.03 = 1.394 here). Interpolating
    # log delta between grid points put eps(1e-5) at 1.351, where delta is still 0.02.
    from dpaudit.mechanisms.accounting.instances import exact_delta_curve, exact_laws

    mech = mechanisms.make("pnsgd", n=100, dim=1, eta=0.5, sigma=1.5, domain="box", low=0.0, high=1.0)
    pair = CanarySpec(kind="gradient").build(mech, 100)
    laws = exact_laws(mech, pair.dataset_a, pair.dataset_b)
    epsilon = exact_epsilon(mech, pair.dataset_a, pair.dataset_b, 1e-5, laws=laws)
    atom_loss = math.log(laws[0].atoms[0.0] / laws[1].atoms[0.0])
    assert atom_loss - 1e-4 < epsilon <= atom_loss
    below, at = exact_delta_curve(mech, pair.dataset_a, pair.dataset_b, [epsilon - 1e-9, epsilon], laws=laws)
    assert below > 1e-5 >= at


def test_exact_score_audit_reaches_the_ceiling():
    # Issue 8: an audit with the exact likelihood-ratio score of a projected instance certifies at
    # least 0.9 of the statistical ceiling for its trial count.
    mech = mechanisms.make("pnsgd", n=20, dim=1, eta=0.1, sigma=2.0, domain="box", low=0.0, high=1.0, init=[0.5])
    pair = CanarySpec(kind="gradient").build(mech, 20)
    result = audit(pair=pair, trials=200_000, delta=1e-5, score="exact", seed=4)
    certified = result.epsilon_lower_bound
    ceiling = exact_ceiling(*likelihood_ratio_law(exact_laws(mech, pair.dataset_a, pair.dataset_b)),
                            trials=180_000, delta=1e-5)
    assert certified >= 0.9 * ceiling
    assert certified <= exact_epsilon(mech, pair.dataset_a, pair.dataset_b, 1e-5)
