"""An audit's identity includes the code: changed code recomputes, unchanged code reuses."""

from __future__ import annotations

import importlib

import numpy as np

import dpaudit
from dpaudit.auditing.jobs import fingerprint

MODULE = '''
import dataclasses
import numpy as np
import torch
from dpaudit.mechanisms.base import Mechanism


@dataclasses.dataclass(frozen=True)
class Count(Mechanism):
    name = "user-count"

    def validate(self):
        pass

    output_dim = property(lambda self: 1)
    record_dim = property(lambda self: 1)
    n_records = property(lambda self: None)

    def _sample(self, data, trials, rng, dtype):
        return torch.from_numpy(rng.standard_normal((trials, 1)) * NOISE + float(data.records.sum()))

    def canary_records(self, u, *, reset=False):
        return np.array([1.0]), np.array([0.0]), np.array([-1.0])


NOISE = {noise}
'''


def test_editing_a_mechanism_module_recomputes_and_unchanged_code_reuses(tmp_path, monkeypatch):
    folder = tmp_path / "code"
    folder.mkdir()
    source = folder / "user_count_mechanism.py"
    source.write_text(MODULE.format(noise="1.0"))
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module("user_count_mechanism")
    store = str(tmp_path / "persistent.sqlite")
    first = dpaudit.audit(module.Count(), trials=2_000, store=store)
    assert first.timings["chunks_computed"] > 0
    again = dpaudit.audit(module.Count(), trials=2_000, store=store)
    assert again.audit_id == first.audit_id and again.timings["chunks_computed"] == 0
    assert again.epsilon_lower_bound == first.epsilon_lower_bound
    source.write_text(MODULE.format(noise="1.25"))  # a code change, same class name and parameters
    module = importlib.reload(module)
    changed = dpaudit.audit(module.Count(), trials=2_000, store=store)
    assert changed.audit_id != first.audit_id and changed.code_fingerprint != first.code_fingerprint
    assert changed.timings["chunks_reused"] == 0 and changed.timings["chunks_computed"] > 0


def _noisy(scale):
    def fn(records, rng):
        return [records.sum() + rng.normal(0.0, scale)]
    return fn


def test_a_user_function_is_fingerprinted_by_code_constants_and_closure(tmp_path):
    pair = (np.zeros((1, 1)), np.ones((1, 1)))
    store = str(tmp_path / "s.sqlite")
    runs = {}
    for label, fn in (("a", _noisy(1.0)), ("same", _noisy(1.0)), ("other-closure", _noisy(2.0)),
                      ("other-code", lambda records, rng: [records.sum() + rng.laplace(0.0, 1.0)])):
        mech = dpaudit.from_callable(fn, output_dim=1, name="fn")
        runs[label] = dpaudit.audit(mech, dataset_pair=pair, trials=1_000, store=store)
    assert runs["same"].audit_id == runs["a"].audit_id and runs["same"].timings["chunks_computed"] == 0
    assert runs["other-closure"].audit_id != runs["a"].audit_id
    assert runs["other-code"].audit_id != runs["a"].audit_id


def test_builtin_mechanisms_depend_on_dpaudit_source(monkeypatch):
    mech = dpaudit.make("gaussian", sigma=1.0)
    before = fingerprint.code_fingerprint(mech)
    assert before == fingerprint.code_fingerprint(dpaudit.make("gaussian", sigma=1.0))
    monkeypatch.setattr(fingerprint, "package_fingerprint", lambda: "an edited dpaudit")
    assert fingerprint.code_fingerprint(mech) != before
