"""Library adapters: trials per second through each adapter against one library call per trial.

Run: ``python benchmarks/adapters.py [--trials N] [--json]`` (libraries that
are not installed are skipped). For each library the same release is drawn
two ways, back to back on the same machine:

* ``adapter``: ``mech.sample`` of the adapter (OpenDP: one call releases every
  trial of a chunk; diffprivlib, python-dp: seeded blocks, in 2 worker
  processes too; Opacus: one ``make_private`` run per trial, 2 workers too);
* ``per_call``: the README's way, ``from_callable`` calling the library once
  per trial in this process.

It also times a whole audit (``dpaudit.audit``) of 10^5 trials per side of
the vectorised OpenDP Laplace, which must finish in under 20 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

import dpaudit


def _rate(function, trials: int) -> float:
    function(10)  # warm-up: imports and first-call set-up are not counted
    start = time.perf_counter()
    function(trials)
    return trials / (time.perf_counter() - start)


def _cases(trials: int) -> dict:
    cases = {}
    try:
        from diffprivlib.mechanisms import Laplace

        from dpaudit.mechanisms.adapters import from_diffprivlib

        obj = Laplace(epsilon=1.0, sensitivity=1.0)
        one, two = from_diffprivlib(obj), from_diffprivlib(obj, workers=2)
        per_call = dpaudit.from_callable(lambda records, rng: obj.randomise(float(records.sum())), 1)
        cases["diffprivlib Laplace"] = {
            "adapter": lambda t, m=one: m.sample([[0.0]], trials=t, seed=0),
            "adapter_2_workers": lambda t, m=two: m.sample([[0.0]], trials=t, seed=0),
            "per_call": lambda t, m=per_call: m.sample([[0.0]], trials=t, seed=0), "trials": trials}
    except ImportError:
        pass
    try:
        import opendp.prelude as dp

        from dpaudit.mechanisms.adapters import from_opendp

        dp.enable_features("contrib")
        vector = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)) \
            >> dp.m.then_laplace(scale=1.0)
        scalar = (dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)) >> dp.m.then_laplace(scale=1.0)
        mech = from_opendp(vector, 1.0)
        per_call = dpaudit.from_callable(lambda records, rng: scalar(float(records.sum())), 1)
        cases["opendp Laplace"] = {"adapter": lambda t, m=mech: m.sample([[0.0]], trials=t, seed=0),
                                   "per_call": lambda t, m=per_call: m.sample([[0.0]], trials=t, seed=0),
                                   "trials": trials}
    except ImportError:
        pass
    try:
        from pydp.algorithms.laplacian import BoundedSum

        from dpaudit.mechanisms.adapters import from_pydp

        options = dict(epsilon=1.0, lower_bound=0, upper_bound=1, dtype="float")
        one, two = from_pydp(BoundedSum, **options), from_pydp(BoundedSum, workers=2, **options)
        per_call = dpaudit.from_callable(lambda records, rng: BoundedSum(**options).quick_result(
            records.ravel().tolist()), 1)
        cases["python-dp BoundedSum"] = {
            "adapter": lambda t, m=one: m.sample([[0.0]], trials=t, seed=0),
            "adapter_2_workers": lambda t, m=two: m.sample([[0.0]], trials=t, seed=0),
            "per_call": lambda t, m=per_call: m.sample([[0.0]], trials=t, seed=0), "trials": trials}
    except ImportError:
        pass
    try:
        import opacus  # noqa: F401

        from dpaudit.auditing.checks.zoo.dpsgd import mean_output, zero_linear
        from dpaudit.mechanisms.adapters import from_opacus

        def training(workers):  # the 200-parameter linear model of opacus issue 571 on 12 records, batch 4
            return from_opacus(zero_linear(200), records=np.zeros((12, 1)), batch_size=4, noise_multiplier=1.0,
                               criterion=mean_output, workers=workers)

        one, two = training(1), training(2)
        data = one.neighbours()[0]
        cases["opacus make_private (3 steps, 200 parameters)"] = {
            "adapter": lambda t, m=one: m.sample(data, trials=t, seed=0),
            "adapter_2_workers": lambda t, m=two: m.sample(data, trials=t, seed=0),
            "trials": max(trials // 500, 20)}
    except ImportError:
        pass
    return cases


def _audit_opendp() -> dict | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    from dpaudit.mechanisms.adapters import from_opendp

    dp.enable_features("contrib")
    mech = from_opendp((dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float))
                       >> dp.m.then_laplace(scale=1.0), 1.0)
    start = time.perf_counter()
    result = dpaudit.audit(mech, dataset_pair=mech.neighbours(), trials=100_000, seed=0)
    return {"trials_per_side": 100_000, "seconds": time.perf_counter() - start,
            "epsilon_lower_bound": result.epsilon_lower_bound, "verdict": result.verdict}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []  # every lambda binds its own adapter (default arguments): the names are reused per library
    for name, case in _cases(args.trials).items():
        trials = case["trials"]
        rates = {key: _rate(case[key], trials) for key in ("adapter", "adapter_2_workers", "per_call") if key in case}
        row = {"library": name, "trials": trials, **{f"{k}_trials_per_second": v for k, v in rates.items()}}
        if "per_call" in rates:
            row["speedup_over_per_call"] = max(v for k, v in rates.items() if k != "per_call") / rates["per_call"]
        rows.append(row)
    document = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, "results": rows,
                "opendp_audit": _audit_opendp()}
    if args.json:
        print(json.dumps(document, indent=2))
        return
    for row in rows:
        rates = ", ".join(f"{k.removesuffix('_trials_per_second')} {v:,.0f}/s" for k, v in row.items()
                          if k.endswith("_per_second"))
        speed = f" (x{row['speedup_over_per_call']:.1f} over one call per trial)" if "speedup_over_per_call" in row else ""
        print(f"{row['library']:<30} {row['trials']:>7} trials: {rates}{speed}")
    if document["opendp_audit"]:
        audit = document["opendp_audit"]
        print(f"audit of the OpenDP Laplace, 10^5 trials per side: {audit['seconds']:.1f} s, "
              f"epsilon >= {audit['epsilon_lower_bound']:.3f} ({audit['verdict']})")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
