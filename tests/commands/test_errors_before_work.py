"""Every failure before the work, or named (issue 73): each case is refused before the first trial
(``Mechanism.sample`` is never called) with one line naming the argument or the table."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dpaudit
from dpaudit.cli import main
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.base import Mechanism

GAUSSIAN = '[mechanism]\nname = "gaussian"\n[audit]\ntrials = 400\n'


@pytest.fixture
def no_sampling(monkeypatch):
    """Fail the test if any mechanism samples."""
    def refuse(self, *args, **kwargs):
        raise AssertionError(f"{type(self).__name__} sampled before the refusal")

    monkeypatch.setattr(Mechanism, "sample", refuse)


def _run(tmp_path, text: str, *extra: str, store: str | None = None) -> int:
    config = tmp_path / "c.toml"
    config.write_text(text)
    return main(["run", str(config), "--store", store or str(tmp_path / "s.sqlite"), "--workers", "1", "--quiet",
                 *extra])


def _one_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err, err
    return err


def test_out_naming_a_file_is_refused_before_the_audit(tmp_path, capsys, no_sampling):
    existing = tmp_path / "report.txt"
    existing.write_text("")
    assert _run(tmp_path, GAUSSIAN, "--out", str(existing)) == 2
    assert f"--out {existing}: a file, not a directory" in _one_line(capsys)
    assert _run(tmp_path, GAUSSIAN, "--out", str(existing / "reports")) == 2
    assert f"--out {existing / 'reports'}: {existing} is a file, not a directory" in _one_line(capsys)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_out_in_a_read_only_folder_is_refused_before_the_audit(tmp_path, capsys, no_sampling):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert _run(tmp_path, GAUSSIAN, "--out", str(folder / "reports")) == 2
        assert f"--out {folder / 'reports'}: directory {folder} is read-only" in _one_line(capsys)
    finally:
        folder.chmod(0o755)


def test_store_that_cannot_be_used_is_refused_before_the_configs(tmp_path, capsys, no_sampling):
    not_a_store = tmp_path / "notes.sqlite"
    not_a_store.write_text("not sqlite")
    assert _run(tmp_path, GAUSSIAN, store=str(not_a_store)) == 2
    assert "choose another --store" in _one_line(capsys)
    assert _run(tmp_path, GAUSSIAN, store=str(tmp_path / "missing" / "s.sqlite")) == 2
    assert "does not exist; create it or choose another --store" in _one_line(capsys)


def test_a_model_factory_that_raises_is_a_user_error(tmp_path, capsys, no_sampling):
    (tmp_path / "net.py").write_text("def factory(features, classes):\n    raise RuntimeError('no such layer')\n")
    text = '[mechanism]\nname = "model"\nmodel = "net.py:factory"\ndata = "iris"\nsteps = 2\nbatch_size = 8\n'
    assert _run(tmp_path, text) == 2
    err = _one_line(capsys)
    assert "[mechanism] model: the factory 'net.py:factory' raised RuntimeError: no such layer" in err


def test_bound_accepts_delta_zero_like_run_and_audit(capsys):
    assert main(["bound", "gaussian", "--delta", "0"]) == 0
    assert "needs delta > 0" in capsys.readouterr().out
    assert main(["bound", "laplace", "--delta", "0"]) == 0
    assert "laplace-exact                         epsilon=1 " in capsys.readouterr().out
    assert main(["bound", "gaussian", "--delta", "1"]) == 2
    assert "--delta must be a number in [0, 1), got delta=1.0" in _one_line(capsys)


def test_run_at_delta_zero_with_no_claim_that_applies_is_refused_before_sampling(tmp_path, capsys, no_sampling):
    assert _run(tmp_path, GAUSSIAN + "delta = 0\n") == 2
    err = _one_line(capsys)
    assert ("[audit] delta = 0: every claim of gaussian for the replace-one relation needs delta > 0 "
            "(gaussian-exact)") in err


def test_an_unknown_sweep_key_names_sweep(tmp_path, capsys, no_sampling):
    assert _run(tmp_path, GAUSSIAN + '[sweep]\nsigmaa = [1.0, 2.0]\n') == 2
    err = _one_line(capsys)
    assert "[sweep] sigmaa: names no parameter of mechanism 'gaussian'" in err and "did you mean 'sigma'?" in err
    assert _run(tmp_path, GAUSSIAN + '[sweep]\n"audit.trial" = [400, 800]\n') == 2
    assert "[sweep] audit.trial: names no key of [audit]" in _one_line(capsys)


@pytest.mark.parametrize("pair, message", [
    ((np.zeros((10, 1)), np.zeros((10, 2))),
     "dataset_pair must hold records of one width: S has shape (10, 1) and S' has shape (10, 2)"),
    ((np.ones((3, 1)), np.ones((3, 1))),
     "dataset_pair: S and S' are the same dataset (shape (3, 1)), nothing to tell apart"),
])
def test_dataset_pairs_that_are_no_neighbours_are_refused(pair, message, no_sampling):
    with pytest.raises(ParameterError) as info:
        dpaudit.audit(dpaudit.make("gaussian"), dataset_pair=pair, trials=400)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("sigma", [0.0, -1.0, 1e-300, 1e300])
def test_one_parameter_one_rule_whichever_side_fails(sigma, tmp_path, capsys, no_sampling):
    rule = "sigma must be > 0 and between 1e-100 and 1e+100 (an audit's float64 arithmetic overflows beyond)"
    with pytest.raises(ParameterError, match=r"^sigma must be > 0 and between 1e-100 and 1e\+100 "):
        dpaudit.make("gaussian", sigma=sigma)
    assert _run(tmp_path, f'[mechanism]\nname = "gaussian"\nsigma = {sigma!r}\n') == 2
    assert f"[mechanism] {rule}, got sigma={sigma!r}" in _one_line(capsys)


ALWAYS_NAN = "import math\n\n\ndef always_nan(records, rng):\n    return [math.nan]\n"


def test_search_on_a_function_that_releases_nan_is_refused_in_one_line_without_numpy_warnings(tmp_path, capsys,
                                                                                            monkeypatch):
    # issue 73: "dpaudit search" said "no violation" of a function that always returns NaN, and NumPy's warnings
    # from scoring its outputs reached the screen; now no candidate is screened on NaN, and with every candidate
    # failing the search refuses, saying why
    import warnings  # here: the one test that records warnings itself

    (tmp_path / "nan_code.py").write_text(ALWAYS_NAN)
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["search", "--function", "nan_code.py:always_nan", "--domain", "0", "1", "--epsilon", "1",
                     "--large-records", "0", "--screen-trials", "100", "--trials", "2000", "--quiet"])
    assert code == 2
    assert "every candidate pair failed" in (line := _one_line(capsys)) and "'always_nan' released NaN" in line
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []


NAN_ON_ONE_ANSWER = ("import math\n\nimport numpy as np\n\n\ndef nan_when_first_moves(answers, rng):\n"
                     "    first = float(np.ravel(answers)[0])\n"
                     "    return [math.nan if first > 1.0 else first + rng.laplace()]\n")


def test_a_query_search_refuses_a_pattern_that_releases_nan_naming_it(tmp_path, capsys, monkeypatch):
    # the query patterns' screen refuses the first pattern whose outputs hold NaN, and says which one
    (tmp_path / "nan_answers.py").write_text(NAN_ON_ONE_ANSWER)
    monkeypatch.chdir(tmp_path)
    code = main(["search", "--function", "nan_answers.py:nan_when_first_moves", "--queries", "2", "--epsilon", "1",
                 "--screen-trials", "100", "--trials", "2000", "--quiet"])
    assert code == 2
    line = _one_line(capsys)
    assert "'nan_when_first_moves' released NaN on this pair (pattern " in line, line
