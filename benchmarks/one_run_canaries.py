"""Dirac against random gradient canaries in one training run, raw and drift-fitted scores, over seeds, beside
canaries free of interference.

For each seed, ``examples/models/cnn/one_run.toml`` (or ``--config``) is trained once with its 1,000 gradient
canaries as Dirac canaries (a signed coordinate each, blocks of coordinates when canaries outnumber parameters)
and once as random unit directions: the same positions and inclusion bits (both drawn from the seed before the
directions) and the same training seed. Each run is scored twice: by the raw shift of the parameters along each
canary (``raw``, the score before the fit) and with the data's drift fitted out (``fit``,
``audit.jobs.one_run_scores``). Every one-run test certifies on each set of scores, at confidence 0.95, and the
model-based Gaussian-pair mu is printed beside them. The last row draws the same number of canaries free of
interference from the training's last-iterate linear-loss surrogate laws, once per seed
(``audit.statistics.one_run_ceiling``): what the tests certify when nothing but the DP noise blurs a canary.

Run: ``python benchmarks/one_run_canaries.py [--seeds 40] [--config FILE] [--json]`` (about 7 s per seed on 2
cores). docs/theory.md 9 quotes its figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from dpaudit.auditing.jobs.config import load_configs
from dpaudit.auditing.jobs.one_run_design import train
from dpaudit.auditing.jobs.one_run_scores import canary_scores
from dpaudit.auditing.jobs.one_run_result import gaussian_pair_estimate
from dpaudit.auditing.statistics.one_run_ceiling import FREE_SEED, draw_free_scores
from dpaudit.auditing.statistics.one_run_fdp import METHODS, one_run_audit

ROOT = Path(__file__).resolve().parents[1]
DELTA = 1e-5


def _bounds(scores: np.ndarray, included: np.ndarray, seed: int) -> dict[str, float]:
    row = {method: one_run_audit(scores, included, delta=DELTA, method=method, seed=seed).epsilon_lower_bound
           for method in METHODS}
    return {**row, "gaussian_pair_mu": gaussian_pair_estimate(scores, included, DELTA)["mu"]}


def run(config: Path, seeds: int) -> dict:
    job = load_configs([config])[0].job()
    laws = job.mechanism.surrogate_output_laws()
    designs = [f"{directions}, {score}" for directions in ("dirac", "random") for score in ("raw", "fit")]
    rows: dict[str, list[dict[str, float]]] = {design: [] for design in (*designs, "interference-free")}
    seconds = {"training": 0.0, "fit": 0.0}
    for seed in range(seeds):
        settings = dataclasses.replace(job.settings, seed=seed)
        for directions in ("dirac", "random"):
            started = time.perf_counter()
            this = dataclasses.replace(job, settings=settings, directions=directions)
            canaries, final = train(this, 0)
            seconds["training"] += time.perf_counter() - started
            for score in ("raw", "fit"):
                started = time.perf_counter()
                scores = canary_scores(this, canaries, final, drift=score == "fit")
                seconds["fit"] += (time.perf_counter() - started) * (score == "fit")
                rows[f"{directions}, {score}"].append(_bounds(scores, canaries.included, seed))
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(FREE_SEED, 0)))
        rows["interference-free"].append(_bounds(*draw_free_scores(laws, job.canaries, rng), seed))
    summary = {}
    for design, entries in rows.items():
        summary[design] = {key: {"mean": float(np.mean([e[key] for e in entries])),
                                 "median": float(np.median([e[key] for e in entries]))} for key in entries[0]}
    differences = {}
    for first, second in (("dirac, fit", "random, fit"), ("random, fit", "random, raw"), ("dirac, fit", "dirac, raw")):
        paired = {key: [a[key] - b[key] for a, b in zip(rows[first], rows[second])] for key in rows[first][0]}
        differences[f"{first} - {second}"] = {
            key: {"mean": float(np.mean(v)), "standard_error": float(np.std(v, ddof=1) / np.sqrt(len(v)))}
            for key, v in paired.items()}
    return {"config": str(config), "seeds": seeds, "canaries": job.canaries,
            "parameters": job.mechanism.parameter_count, "summary": summary, "differences": differences,
            "seconds_per_run": {k: v / (2 * seeds) for k, v in seconds.items()}, "rows": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--config", type=Path, default=ROOT / "examples" / "models" / "cnn" / "one_run.toml")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    document = run(args.config, args.seeds)
    if args.json:
        print(json.dumps(document))
        return 0
    keys = (*METHODS, "gaussian_pair_mu")
    print(f"{document['canaries']} canaries, {document['parameters']} parameters, {args.seeds} seeds "
          f"(mean / median over seeds)")
    print(f"{'design':26s} " + " ".join(f"{key:>18s}" for key in keys))
    for design, entry in document["summary"].items():
        print(f"{design:26s} " + " ".join(f"{entry[k]['mean']:8.3f} /{entry[k]['median']:7.3f}  " for k in keys))
    for name, entry in document["differences"].items():
        print(f"{name:26s} " + " ".join(f"{entry[k]['mean']:+8.3f} +-{entry[k]['standard_error']:6.3f}  "
                                         for k in keys))
    print("seconds per training and per drift fit: " + ", ".join(f"{k} {v:.2f}" for k, v in
                                                                 document["seconds_per_run"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
