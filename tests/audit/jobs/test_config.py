"""Broken configs: exit code 2 and one line naming what is wrong, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dpaudit.auditing.jobs.config import ConfigError, load_configs, parse_config
from dpaudit.cli import main
from tests.audit.conftest import SMALL

#: the rest of a positive real parameter's rule (mechanisms.base.Mechanism._real_rule)
WHOLE = "and between 1e-100 and 1e+100 (an audit's float64 arithmetic overflows beyond)"

REPO = Path(__file__).resolve().parents[3]

BROKEN = [
    ("[mechanism]\nname = 'pnsgd'\n[audit]\ntrials = 'many'\n", "[audit] trials: must be an integer >= 20, got trials='many'"),
    ("[mechanism]\nname = 'pnsgd'\n[audit]\ndelta = 1.5\n", "[audit] delta: must be a number in [0, 1), got delta=1.5"),
    ("[mechanism]\nname = 'pnsgd'\n[audit]\nconfidence = 0\n", "[audit] confidence: must be a number in [0.5, 1)"),
    ("[mechanism]\nname = 'pnsgd'\n[audit]\nthreshold = 'best'\n", "[audit] threshold: must be one of 'split', 'union'"),
    ("[mechanism]\nname = 'pnsgd'\n[audit]\nchunksize = 5\n", "[audit] chunksize: unknown key"),
    ("[mechanism]\nname = 'pnsgd'\nsigma = -1.0\n", f"[mechanism] sigma must be > 0 {WHOLE}, got sigma=-1.0"),
    ("[mechanism]\nname = 'pnsgd'\nsigm = 1.0\n", "[mechanism] unknown parameter 'sigm'"),
    ("[mechanism]\nname = 'psgd'\n", "[mechanism] mechanism must be one of"),
    ("[mechanism]\nn = 3\n", "[mechanism] name: missing"),
    ("[mechanism]\nname = 'pnsgd'\nn = 5\n[canary]\nindex = 9\n", "canary index must be an integer in 1..5 or 'all', got index=9"),
    ("[mechanism]\nname = 'pnsgd'\n[canary]\nkind = 'magic'\n", "[canary] kind: must be one of input, gradient, reset, boundary"),
    ("[mechanism]\nname = 'pnsgd'\n[canary]\nsize = 2\n", "[canary] size: unknown key"),
    ("[mechanism]\nname = 'pnsgd'\n[attack]\nscore = 'oracle'\n", "[attack] score: must be one of projection"),
    ("[mechanism]\nname = 'pnsgd'\n[mechanisms]\nx = 1\n", "unknown table or key 'mechanisms'"),
    ("[mechanism]\nname = 'pnsgd'\n[sweep]\nsigma = 2.0\n", "[sweep] sigma: must be a non-empty list, got sigma=2.0"),
    ("[mechanism]\nname = 'pnsgd'\n[sweep]\nsigma = [1.0, -2.0]\n", f"[mechanism] sigma must be > 0 {WHOLE}, got sigma=-2.0"),
    ("title = 3\n[mechanism]\nname = 'pnsgd'\n", "title must be a string, got title=3"),
    ("[mechanism\nname = 'pnsgd'\n", "not valid TOML"),
    ("mechanism = 'pnsgd'\n", "mechanism must be a table [mechanism]"),
]


@pytest.mark.parametrize("text, message", BROKEN)
def test_broken_configs_exit_2_with_one_line(text, message, write_config, tmp_path, capsys):
    config = write_config(text)
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dpaudit: error: ") and "Traceback" not in err
    assert message in err and str(config) in err


def test_missing_file_in_a_real_process(tmp_path):
    result = subprocess.run([sys.executable, "-m", "dpaudit", "run", str(tmp_path / "missing.toml")],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"dpaudit: error: {tmp_path / 'missing.toml'}: no such config file\n"


@pytest.mark.parametrize("flags, message", [
    (["--workers", "0"], "argument --workers: must be an integer >= 1, got 0"),
    (["--backend", "dask"], "--backend dask needs --scheduler ADDRESS"),
    (["--trials", "5"], "argument --trials: must be an integer >= 20, got 5"),  # the flag is wrong, not the config
    (["--backend", "cluster"], "argument --backend: invalid choice: 'cluster'"),
])
def test_bad_flags(flags, message, tmp_path, write_config, capsys):
    argv = ["run", str(write_config(SMALL)), "--store", str(tmp_path / "s.sqlite"), "--quiet", *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_config_hash_is_stable_and_covers_defaults():
    raw = {"mechanism": {"name": "pnsgd", "n": 6}, "audit": {"trials": 1000}}
    first, = parse_config(raw)
    second, = parse_config({"mechanism": {"name": "pnsgd", "n": 6, "sigma": 1.0}, "audit": {"trials": 1000}})
    assert first.audit_id == second.audit_id  # sigma=1.0 is the default
    third, = parse_config({"mechanism": {"name": "pnsgd", "n": 6, "sigma": 2.0}, "audit": {"trials": 1000}})
    assert third.audit_id != first.audit_id


def test_configs_never_execute_code(tmp_path):
    path = tmp_path / "evil.toml"
    path.write_text("[mechanism]\nname = \"__import__('os').system('touch pwned')\"\n")
    with pytest.raises(ConfigError):
        load_configs([path])
    assert not (tmp_path / "pwned").exists()
