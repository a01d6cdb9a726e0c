"""End to end: ``dpaudit run`` of 10^6 trials per side of pnsgd (n = 100, dim = 10).

Reports wall time and the peak memory of the whole process tree (the CLI and
its joblib workers), sampled every 0.2 s with psutil: PSS (shared libraries
such as torch shared out between the processes) and summed RSS (counted once
per process, an overestimate).
Run: ``python benchmarks/audit_e2e.py [--trials N] [--json]``.
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
title = "benchmark: pnsgd 10^6 trials"
[mechanism]
name = "pnsgd"
n = 100
dim = 10
eta = 0.1
sigma = 1.0
domain = "ball"
[canary]
kind = "gradient"
[audit]
trials = {trials}
chunk_size = 20000
"""


def tree_memory(process: psutil.Process) -> tuple[int, int]:
    """Summed RSS (counts shared libraries once per process) and PSS (shares them out) of the tree."""
    rss = pss = 0
    for proc in [process, *process.children(recursive=True)]:
        try:
            info = proc.memory_full_info()
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
        except psutil.Error:
            pass
    return rss, pss


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "audit.toml"
        config.write_text(CONFIG.format(trials=args.trials))
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "dpaudit", "run", str(config), "--store",
                                  str(Path(directory) / "s.sqlite"), "--json", "--quiet"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        process, peak, peak_pss = psutil.Process(child.pid), 0, 0
        while child.poll() is None:
            rss, pss = tree_memory(process)
            peak, peak_pss = max(peak, rss), max(peak_pss, pss)
            time.sleep(0.2)
        out, err = child.communicate()
        seconds = time.perf_counter() - started
    if child.returncode != 0:
        print(err, file=sys.stderr)
        return child.returncode
    document = json.loads(out)
    row = {"benchmark": "audit_e2e", "trials_per_side": args.trials, "seconds": seconds,
           "peak_tree_rss_mib": peak / 2**20, "peak_tree_pss_mib": peak_pss / 2**20, "epsilon_lower_bound": document["empirical"]["epsilon_lower_bound"],
           "verdict": document["verdict"]}
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(f"{args.trials} trials per side: {seconds:.1f} s wall, peak memory of the CLI and its workers "
              f"{peak_pss / 2**20:.0f} MiB PSS ({peak / 2**20:.0f} MiB summed RSS), "
              f"eps >= {row['epsilon_lower_bound']:.3f}, {row['verdict']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
