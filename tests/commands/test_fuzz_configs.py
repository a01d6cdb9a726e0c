"""Broken configs: each exits 2 within 10 s with one line naming the key; none exits 3 or hangs.

Every case runs ``dpaudit run`` in-process on one config file. The cases
include every failure found by fuzzing: sizes that hung or ran out of memory,
values that were silently ignored, errors that named no key, a message that
echoed a file's first line.
"""

from __future__ import annotations

import socket
import sys

import numpy as np
import pytest

from dpaudit.cli import main

PNSGD = '[mechanism]\nname = "pnsgd"\nn = 20\ndim = 2\n'
GAUSS = '[mechanism]\nname = "gaussian"\n'
KERNEL = '[mechanism]\nname = "projected-kernel"\nn = 10\n'
DPSGD = '[mechanism]\nname = "dp-sgd"\nn = 50\ndim = 2\nbatch_size = 5\nsteps = 10\n'
SHUFFLE = '[mechanism]\nname = "shuffled-rr"\nn = 50\n'
AUDIT = "[audit]\ntrials = 1000\n"
DEEP = "[" * 5000 + "1.0" + "]" * 5000
SWEEP = "[sweep]\n" + "".join(f'"{key}" = {np.linspace(0.1, 5, 50).round(3).tolist()}\n'
                               for key in ("sigma", "eta", "radius", "lipschitz", "audit.delta", "audit.confidence"))

#: (id, config text, a word the one-line error must contain)
CASES = [
    # sizes that hung, ran out of memory or exited 3
    ("trials-1e13", PNSGD + "[audit]\ntrials = 10000000000000\n", "trials"),
    ("trials-beyond-int64", PNSGD + "[audit]\ntrials = 99999999999999999999\n", "trials"),
    ("sweep-1.6e10", PNSGD + SWEEP, "50 x 50 x 50 x 50 x 50 x 50 = 15625000000 combinations"),
    ("sweep-dotted-key", PNSGD + "[sweep]\naudit.delta = [1e-5, 1e-6]\n", "[sweep] audit"),
    ("sigma-nested-5000", PNSGD + f"sigma = {DEEP}\n", "sigma"),
    ("sigma-nested-6", PNSGD + "sigma = [[[[[[1.0]]]]]]\n", "sigma"),
    ("gaussian-dim-1e8", GAUSS + "dim = 100000000\n", "dim"),
    ("pnsgd-n-1e9", '[mechanism]\nname = "pnsgd"\nn = 1000000000\n', "n="),
    ("pnsgd-n-1e8-all", '[mechanism]\nname = "pnsgd"\nn = 100000000\n[canary]\nindex = "all"\n', "index"),
    ("dpsgd-huge-n", DPSGD.replace("n = 50", "n = 10000000") + "loss = 'logistic'\n", "n="),
    ("chunk-size-huge", GAUSS + "dim = 1000\n[audit]\ntrials = 100000000\nchunk_size = 100000000\n", "dim"),
    ("n-beyond-int64", '[mechanism]\nname = "pnsgd"\nn = 9223372036854775808\n', "n"),
    ("seed-beyond-int64", PNSGD + "[audit]\nseed = -9223372036854775809\n", "seed"),
    ("index-on-gaussian", GAUSS + "[canary]\nindex = 5\n", "index"),
    # values that were silently ignored
    ("index-duplicate", PNSGD + "[canary]\nindex = [5, 5]\n", "index"),
    ("index-on-shuffled-rr", SHUFFLE + "[canary]\nindex = 3\n", "index"),
    ("index-all-on-gaussian", GAUSS + '[canary]\nindex = "all"\n', "index"),
    ("scale-with-gaussian-noise", PNSGD + "scale = 1.0\n", "scale"),
    ("sigma-with-laplace-noise", PNSGD + 'noise = "laplace"\nscale = 1.0\nsigma = 2.0\n', "sigma"),
    ("radius-on-whole", PNSGD + 'domain = "whole"\nradius = 3.0\n', "radius"),
    ("low-on-ball", PNSGD + "low = -2.0\n", "low"),
    ("high-on-whole", DPSGD + "high = 2.0\n", "high"),
    ("contraction-on-translation", KERNEL + "contraction = 0.5\n", "contraction"),
    ("smoothness-on-linear", PNSGD + "smoothness = 2.0\n", "smoothness"),
    ("canary-seed-without-random", PNSGD + "[canary]\nseed = 3\n", "seed"),
    # errors that named no key, or echoed a file
    ("init-strings", PNSGD + 'init = ["x", "y"]\n', "init"),
    ("init-wrong-length", PNSGD + "init = [0.1, 0.2, 0.3]\n", "init"),
    ("background-passwd", PNSGD + '[canary]\nbackground = "/etc/passwd"\n', "background"),
    ("background-words", PNSGD + '[canary]\nbackground = "{words}"\n', "background"),
    ("background-pickle", PNSGD + '[canary]\nbackground = "{pickle}"\n', "background"),
    ("background-wrong-shape", PNSGD + '[canary]\nbackground = "{shape}"\n', "background"),
    ("background-missing", PNSGD + '[canary]\nbackground = "/nonexistent/file.npy"\n', "background"),
    # types and ranges
    ("sigma-string", PNSGD + 'sigma = "big"\n', "sigma"),
    ("sigma-negative", PNSGD + "sigma = -1.0\n", "sigma"),
    ("sigma-nan", PNSGD + "sigma = nan\n", "sigma"),
    ("sigma-inf", PNSGD + "sigma = inf\n", "sigma"),
    ("eta-zero", PNSGD + "eta = 0.0\n", "eta"),
    ("n-zero", '[mechanism]\nname = "pnsgd"\nn = 0\n', "n"),
    ("n-float", '[mechanism]\nname = "pnsgd"\nn = 10.5\n', "n"),
    ("dim-bool", PNSGD.replace("dim = 2", "dim = true"), "dim"),
    ("domain-unknown", PNSGD + 'domain = "sphere"\n', "domain"),
    ("loss-unknown", PNSGD + 'loss = "hinge"\n', "loss"),
    ("noise-unknown", PNSGD + 'noise = "cauchy"\n', "noise"),
    ("variant-unknown", PNSGD + 'variant = "restart"\n', "variant"),
    ("dtype-float16", PNSGD + 'dtype = "float16"\n', "dtype"),
    ("box-low-above-high", PNSGD + 'domain = "box"\nlow = 1.0\nhigh = -1.0\n', "low"),
    ("kernel-step-unknown", KERNEL + 'step = "rotate"\n', "step"),
    ("kernel-contraction-one", KERNEL + 'step = "contraction"\ncontraction = 1.0\n', "contraction"),
    ("dpsgd-sampling-unknown", DPSGD + 'sampling = "stratified"\n', "sampling"),
    ("dpsgd-batch-above-n", DPSGD.replace("batch_size = 5", "batch_size = 500"), "batch_size"),
    ("multi-epoch-zero", '[mechanism]\nname = "multi-epoch-pnsgd"\nepochs = 0\n', "epochs"),
    ("shuffle-epsilon0-negative", SHUFFLE + "epsilon0 = -1.0\n", "epsilon0"),
    ("mechanism-unknown", '[mechanism]\nname = "pnsdg"\n', "mechanism"),
    ("mechanism-name-missing", "[mechanism]\nsigma = 1.0\n", "name"),
    ("mechanism-param-unknown", PNSGD + "sigmaa = 1.0\n", "sigmaa"),
    ("mechanism-not-a-table", 'mechanism = "pnsgd"\n', "mechanism"),
    ("table-unknown", PNSGD + "[attacks]\nscore = 'projection'\n", "attacks"),
    ("title-not-string", 'title = 5\n' + PNSGD, "title"),
    ("canary-kind-unknown", PNSGD + '[canary]\nkind = "gradiant"\n', "kind"),
    ("canary-kind-unsupported", PNSGD + '[canary]\nkind = "reset"\n', "reset"),
    ("canary-pair-unknown", PNSGD + '[canary]\npair = "swap"\n', "pair"),
    ("canary-pair-remove-fixed-n", PNSGD + '[canary]\npair = "remove"\n', "remove"),
    ("canary-boundary-whole", PNSGD + 'domain = "whole"\n[canary]\nkind = "boundary"\n', "boundary"),
    ("canary-direction-zero", PNSGD + "[canary]\ndirection = [0.0, 0.0]\n", "direction"),
    ("canary-direction-length", PNSGD + "[canary]\ndirection = [1.0, 0.0, 0.0]\n", "direction"),
    ("canary-index-zero", PNSGD + "[canary]\nindex = 0\n", "index"),
    ("canary-index-above-n", PNSGD + "[canary]\nindex = 21\n", "index"),
    ("canary-index-empty", PNSGD + "[canary]\nindex = []\n", "index"),
    ("canary-index-word", PNSGD + '[canary]\nindex = "first"\n', "index"),
    ("canary-key-unknown", PNSGD + "[canary]\nposition = 3\n", "position"),
    ("score-unknown", PNSGD + '[attack]\nscore = "projecton"\n', "score"),
    ("attack-key-unknown", PNSGD + '[attack]\nthreshold = 0.5\n', "threshold"),
    ("audit-trials-small", PNSGD + "[audit]\ntrials = 5\n", "trials"),
    ("audit-trials-string", PNSGD + '[audit]\ntrials = "1e5"\n', "trials"),
    ("audit-trials-float", PNSGD + "[audit]\ntrials = 1e5\n", "trials"),
    ("audit-delta-one", PNSGD + "[audit]\ndelta = 1.0\n", "delta"),
    ("audit-confidence-zero", PNSGD + "[audit]\nconfidence = 0.0\n", "confidence"),
    ("audit-seed-negative", PNSGD + "[audit]\nseed = -1\n", "seed"),
    ("audit-threshold-unknown", PNSGD + '[audit]\nthreshold = "best"\n', "threshold"),
    ("audit-chunk-zero", PNSGD + "[audit]\nchunk_size = 0\n", "chunk_size"),
    ("audit-calibration-large", PNSGD + "[audit]\ncalibration_fraction = 0.7\n", "calibration_fraction"),
    ("audit-key-unknown", PNSGD + "[audit]\nworkers = 4\n", "workers"),
    ("sweep-not-list", PNSGD + "[sweep]\nsigma = 1.0\n", "sigma"),
    ("sweep-empty", PNSGD + "[sweep]\nsigma = []\n", "sigma"),
    ("sweep-bad-table", PNSGD + '[sweep]\n"report.title" = ["a"]\n', "report.title"),
    ("sweep-bad-value", PNSGD + "[sweep]\nsigma = [1.0, -2.0]\n", "sigma"),
    ("inline-table-value", PNSGD + "sigma = {value = 1.0}\n", "sigma"),
    ("not-toml", "[mechanism\nname = pnsgd\n", "TOML"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Files the background cases point to."""
    directory = tmp_path_factory.mktemp("backgrounds")
    words = directory / "words.txt"
    words.write_text("secret-first-line alpha beta\nsecond line\n")
    pickled = directory / "pickled.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    shape = directory / "shape.npy"
    np.save(shape, np.zeros((3, 7)))
    return {"words": words, "pickle": pickled, "shape": shape}


def test_there_are_at_least_60_cases():
    assert len(CASES) >= 60 and len({name for name, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("name, text, key", CASES, ids=[case[0] for case in CASES])
def test_broken_config_exits_2_naming_the_key(name, text, key, files, tmp_path, capsys):
    config = tmp_path / "broken.toml"
    config.write_text(text.format(**files) if "{" in text and "{value" not in text else text)
    code = main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--quiet", "--trials", "1000"]
                if "trials" not in text else ["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(err) == 1 and err[0].startswith("dpaudit: error: "), err
    assert key in err[0], err[0]
    for secret in ("root:", "secret-first-line", "second line"):
        assert secret not in err[0]
    assert not (tmp_path / "s.sqlite").exists()  # refused before the store was opened


def test_trials_on_the_command_line_beyond_the_machine(tmp_path, capsys):
    config = tmp_path / "ok.toml"
    config.write_text(PNSGD)
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--trials", "10000000000000"]) == 2
    line = capsys.readouterr().err.strip()
    assert "trials=10000000000000" in line and "chunks" in line and "\n" not in line


def test_max_memory_flag(tmp_path, capsys):
    config = tmp_path / "ok.toml"
    config.write_text(GAUSS + "dim = 1000\n" + AUDIT)
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--max-memory", "100MiB"]) == 2
    assert "budget of 100.0 MiB" in capsys.readouterr().err
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--max-memory", "lots"]) == 2
    assert "max-memory must be a size" in capsys.readouterr().err


@pytest.mark.parametrize("address, words", [
    ("tls://127.0.0.1:8786", "tls:// needs certificates"),
    ("tcp://127.0.0.1:1", "cannot reach the Dask scheduler at 127.0.0.1:1"),
    ("tcp://127.0.0.1:99999", "invalid port"),
    ("http://[::1", "scheduler"),
    ("ftp://host:21", "scheduler must be an address"),
])
def test_bad_dask_schedulers_fail_fast_in_one_line(address, words, tmp_path, capsys, monkeypatch):
    config = tmp_path / "ok.toml"
    config.write_text(PNSGD + AUDIT)
    # fast by construction: refused before Dask is imported (an import of dask.distributed would fail here
    # with another message), so no client waits on its connection timeout; at most one socket is tried
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    connections = []
    real_connect = socket.create_connection

    def counted_connect(address, timeout=None, *args, **kwargs):
        connections.append(timeout)
        return real_connect(address, timeout, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", counted_connect)
    code = main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--backend", "dask",
                 "--scheduler", address])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0], err
    assert len(connections) <= 1 and all(timeout is not None and timeout <= 3 for timeout in connections)


@pytest.mark.parametrize("values, words", [
    (np.zeros((50, 2)), "shape (50, 2)"),
    (np.ones(50) + 1j, "complex"),
    (np.ones(50, dtype=bool), "booleans"),
    (np.array(["a"] * 50), "<U1 values"),
])
def test_estimate_refuses_what_is_not_one_real_score_per_trial(values, words, tmp_path, capsys):
    bad = tmp_path / "bad.npy"
    np.save(bad, values)
    good = tmp_path / "good.npy"
    np.save(good, np.zeros(50))
    assert main(["estimate", "--scores-a", str(bad), "--scores-b", str(good), "--delta", "1e-5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--scores-a" in err[0] and words in err[0], err


def test_estimate_of_constant_scores_is_a_clean_zero(tmp_path, capsys, recwarn):
    constant = tmp_path / "c.npy"
    np.save(constant, np.ones(1000))
    assert main(["estimate", "--scores-a", str(constant), "--scores-b", str(constant), "--delta", "1e-5",
                 "--json"]) == 0
    import json

    document = json.loads(capsys.readouterr().out)
    assert document["empirical"]["epsilon_lower_bound"] == 0.0 and document["empirical"]["mu_lower_bound"] == 0.0
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_estimate_never_quotes_the_file(tmp_path, capsys):
    text = tmp_path / "words.txt"
    text.write_text("secret-token 1 2\n")
    assert main(["estimate", "--scores-a", str(text), "--scores-b", str(text), "--delta", "1e-5"]) == 2
    assert "secret-token" not in capsys.readouterr().err
