"""Peak memory of the main process at 10^7 trials per side and 3 canary positions of ``pnsgd``.

Certification is streamed (``dpaudit.auditing.jobs.streaming``): thresholds are fixed
on calibration, then counts are added up one stored chunk at a time, so the
main process's memory must not grow with the number of trials. This runs
``dpaudit run`` in a child process, samples the child's own RSS (not its
joblib workers') every 0.2 s with psutil, and reads its peak (``VmHWM``) at the
end. It then recomputes the bounds the non-streaming way, loading every
stored certification score into memory and calling the estimators on whole
arrays, and checks the two results are identical.

Run: ``python benchmarks/streaming_memory.py [--trials N] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

CONFIG = """
title = "benchmark: streaming certification"
[mechanism]
name = "pnsgd"
n = 20
dim = 2
eta = 0.1
sigma = 1.0
[canary]
kind = "gradient"
index = [1, 10, 20]
[audit]
trials = {trials}
chunk_size = 100000
"""


def _peak_rss(pid: int) -> int:
    """``VmHWM`` (the kernel's record of peak RSS) of a live process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def whole_array_bounds(store: Path, document: dict) -> dict[int, tuple[float, float]]:
    """Epsilon and mu bounds of every position, recomputed from all stored scores at once."""
    from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, gdp_lower_bound
    from dpaudit.auditing.jobs.store import Store

    settings = document["audit"]
    confidence = document["empirical"]["per_index_confidence"]
    bounds = {}
    with Store(store) as db:
        for row in document["per_index"]:
            index = row["index"]
            cal_a, cal_b, cert_a, cert_b = (db.get_chunks(document["audit_id"], index, side, part)
                                            for part in ("cal", "cert") for side in ("a", "b"))
            eps = epsilon_lower_bound(cert_a, cert_b, delta=settings["delta"], confidence=confidence,
                                      threshold=settings["threshold"], calibration=(cal_a, cal_b))
            gdp = gdp_lower_bound(cert_a, cert_b, confidence=confidence, threshold=settings["threshold"],
                                  calibration=(cal_a, cal_b))
            bounds[index] = (eps.epsilon_lower_bound, gdp.mu_lower_bound)
    return bounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "audit.toml"
        config.write_text(CONFIG.format(trials=args.trials))
        store = Path(directory) / "s.sqlite"
        started = time.perf_counter()
        # output goes to files: a pipe nobody reads while polling would fill up and block the child
        out_file, err_file = Path(directory) / "out.json", Path(directory) / "err.txt"
        with out_file.open("w") as out_stream, err_file.open("w") as err_stream:
            child = subprocess.Popen([sys.executable, "-m", "dpaudit", "run", str(config), "--store", str(store),
                                      "--json", "--quiet"], stdout=out_stream, stderr=err_stream)
        process, peak = psutil.Process(child.pid), 0
        while child.poll() is None:
            try:
                peak = max(peak, process.memory_info().rss, _peak_rss(child.pid))
            except (psutil.Error, OSError):
                pass
            time.sleep(0.2)
        child.wait()
        out, err = out_file.read_text(), err_file.read_text()
        seconds = time.perf_counter() - started
        if child.returncode != 0:
            print(err, file=sys.stderr)
            return child.returncode
        document = json.loads(out)
        streamed = {row["index"]: (row["empirical"]["epsilon_lower_bound"], row["empirical"]["mu_lower_bound"])
                    for row in document["per_index"]}
        whole = whole_array_bounds(store, document)
    row = {"benchmark": "streaming_memory", "trials_per_side": args.trials, "positions": len(streamed),
           "seconds": seconds, "main_peak_rss_mib": peak / 2**20, "streamed": streamed, "whole_arrays": whole,
           "identical": streamed == whole}
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(f"{args.trials} trials per side x {len(streamed)} positions: {seconds:.0f} s; main process peak "
              f"RSS {peak / 2**20:.0f} MiB; streamed bounds {streamed}; identical to whole arrays: {streamed == whole}")
    return 0 if streamed == whole else 1


if __name__ == "__main__":
    sys.exit(main())
