"""Own model modules named in a config: ``model = "file.py:factory"`` in ``[mechanism]``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpaudit.auditing.jobs.config import load_configs
from dpaudit.auditing.jobs.runner import RunOptions
from dpaudit.cli import main
from tests.helpers import kill_run_after, run_documents

FACTORY = """
from torch import nn


def small(features, classes):
    return nn.Sequential(nn.Linear(features, 3), nn.Tanh(), nn.Linear(3, classes))


def not_a_module(features, classes):
    return 42
"""

CONFIG = """
title = "own model"
[mechanism]
name = "model"
model = "{spec}"
data = "iris"
steps = 4
batch_size = 16
sampling = "poisson"
[canary]
kind = "gradient"
pair = "zero"
[attack]
score = "projection"
[audit]
trials = 400
chunk_size = 100
seed = 2
"""


@pytest.fixture
def own_model(tmp_path):
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "mine.py").write_text(FACTORY)

    def write(spec: str = "nets/mine.py:small", extra: str = "", name: str = "audit.toml"):
        path = tmp_path / name
        path.write_text(CONFIG.format(spec=spec) + extra)
        return path
    return write


def test_a_config_names_an_own_module_relative_to_itself(own_model, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir("/")  # the path is the config's, not the working directory's
    config = own_model()
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--json", "--quiet",
                 "--workers", "1"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["mechanism"]["params"]["model"] == "nets/mine.py:small"
    assert document["verdict"] in ("consistent", "inconclusive")
    assert document["empirical"]["trials"] == 400


def test_the_module_source_is_in_the_audit_id(own_model, tmp_path):
    config = own_model()
    before = load_configs([config])[0]
    assert load_configs([config])[0].audit_id == before.audit_id  # stable
    source = tmp_path / "nets" / "mine.py"
    source.write_text(FACTORY.replace("nn.Tanh()", "nn.ReLU()"))
    after = load_configs([config])[0]
    assert after.audit_id != before.audit_id
    assert after.job().code_fingerprint != before.job().code_fingerprint


@pytest.mark.parametrize("spec, message", [
    ("nets/missing.py:small", "[mechanism] model: no such file"),
    ("nets/mine.py:absent", "[mechanism] model: "),
    ("nets/mine.py:not_a_module", "returned a int, not a torch.nn.Module"),
])
def test_a_bad_model_entry_exits_2_with_one_line_naming_it(own_model, tmp_path, capsys, spec, message):
    config = own_model(spec)
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert message in err and f"model='{spec}'" in err and str(config) in err


def test_workers_and_dask_load_the_module_again_from_its_reference(own_model, tmp_path):
    configs = load_configs([own_model()])
    one = run_documents(configs, RunOptions(store=str(tmp_path / "one.sqlite"), workers=1, progress=False))[0]
    two = run_documents(configs, RunOptions(store=str(tmp_path / "two.sqlite"), workers=2, progress=False))[0]
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        dask = run_documents(configs, RunOptions(store=str(tmp_path / "dask.sqlite"), backend="dask",
                                                 scheduler=cluster.scheduler_address, progress=False))[0]
    for other in (two, dask):
        assert other["audit_id"] == one["audit_id"]
        assert other["empirical"]["epsilon_lower_bound"] == one["empirical"]["epsilon_lower_bound"]


def test_sigkill_midway_then_resume_from_the_store(own_model, tmp_path):
    config = own_model(extra="").read_text().replace("trials = 400\nchunk_size = 100", "trials = 8000\nchunk_size = 400")
    path = tmp_path / "killable.toml"
    path.write_text(config)
    store = tmp_path / "killed.sqlite"
    finished = kill_run_after(path, store, chunks=6, cwd=tmp_path, poll=0.1)
    total = 2 * (2 + 18)  # two sides: 800 calibration and 7200 certification trials in chunks of 400
    assert 6 <= finished < total, finished
    configs = load_configs([path])
    resumed = run_documents(configs, RunOptions(store=str(store), workers=1, progress=False))[0]
    assert resumed["timings"]["chunks_reused"] == finished
    assert resumed["timings"]["chunks_computed"] == total - finished  # no finished chunk recomputed
    fresh = run_documents(configs, RunOptions(store=str(tmp_path / "fresh.sqlite"), workers=1, progress=False))[0]
    assert resumed["empirical"]["epsilon"] == fresh["empirical"]["epsilon"]


def test_a_sweep_over_an_own_module(own_model):
    configs = load_configs([own_model(extra="[sweep]\nnoise_multiplier = [1.0, 2.0]\n")])
    assert [c.mechanism.noise_multiplier for c in configs] == [1.0, 2.0]
    assert all(c.mechanism.params["model"] == "nets/mine.py:small" for c in configs)
    assert len({c.audit_id for c in configs}) == 2
    outputs = configs[0].mechanism.sample(trials=3, seed=0)
    assert outputs.shape == (3, configs[0].mechanism.parameter_count) and np.all(np.isfinite(outputs))
