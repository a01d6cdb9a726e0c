"""Throughput check: fail when a sampler falls more than 10% below its recorded ratio to the noise floor.

Run on demand (not part of the test command)::

    python benchmarks/check_throughput.py              # measure, compare, exit 1 on a regression
    python benchmarks/check_throughput.py --from-json run.json   # compare a saved ``throughput.py --json``
    python benchmarks/check_throughput.py --record     # measure and store the new ratios

Each case of ``benchmarks/throughput.py`` is measured the same way (the
mechanism and its noise floor back to back in each round, the ratio taken
within a round, the median over rounds) and its median ratio compared with
the one recorded in ``benchmarks/throughput_ratios.json``. A case fails when
``measured < (1 - tolerance) * recorded`` (tolerance 0.10). Ratios, not rates,
are recorded: they carry over between machines far better than trials per
second, and load on a shared machine slows the floor and the mechanism alike
within a round. A failing case on a busy machine should be rerun (``uptime``
shows the load) before it is believed.

Exit status: 0 every case passes, 1 a case is below its bound, 2 bad input
(a missing or malformed record, an unknown case).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RATIOS = HERE / "throughput_ratios.json"
TOLERANCE = 0.10


def load_record(path: Path) -> dict:
    """The recorded ratios: ``{"tolerance": float, "ratios": {case: ratio}, ...}``."""
    try:
        record = json.loads(path.read_text())
        ratios = {str(name): float(value) for name, value in record["ratios"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise SystemExit(f"error: cannot read the recorded ratios from {path}: {error}") from None
    tolerance = float(record.get("tolerance", TOLERANCE))
    if not 0 <= tolerance < 1 or not all(0 < value for value in ratios.values()):
        raise SystemExit(f"error: recorded ratios must be positive and tolerance in [0, 1), got {path}")
    return {**record, "ratios": ratios, "tolerance": tolerance}


def compare(measured: dict[str, float], record: dict) -> list[dict]:
    """One row per recorded case: measured median ratio, the bound ``(1 - tolerance) * recorded``, pass or fail."""
    rows = []
    for name, recorded in record["ratios"].items():
        if name not in measured:
            raise SystemExit(f"error: case {name!r} is recorded but was not measured")
        bound = (1 - record["tolerance"]) * recorded
        rows.append({"name": name, "measured": measured[name], "recorded": recorded, "bound": bound,
                     "ok": measured[name] >= bound})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=50_000)
    parser.add_argument("--loop-trials", type=int, default=100, help="trials of the per-trial loops (not checked)")
    parser.add_argument("--ratios", type=Path, default=RATIOS, help="the recorded ratios (JSON)")
    parser.add_argument("--from-json", type=Path,
                        help="check the output of 'throughput.py --json' instead of measuring")
    parser.add_argument("--record", action="store_true", help="store the measured medians as the new record")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.trials < 1 or args.loop_trials < 1:
        print(f"error: rounds, trials and loop-trials must be >= 1, got rounds={args.rounds}, "
              f"trials={args.trials}, loop-trials={args.loop_trials}", file=sys.stderr)
        return 2
    try:
        if args.from_json is not None:
            try:
                rows = json.loads(args.from_json.read_text())["results"]
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise SystemExit(f"error: cannot read a throughput.py --json output from {args.from_json}: {error}")
        else:
            sys.path.insert(0, str(HERE))
            import throughput

            rows = throughput.measure(args.trials, args.loop_trials, args.rounds)
        measured = {row["name"]: float(row["ratio_to_floor"]) for row in rows}
        ranges = {row["name"]: row.get("ratio_to_floor_range") for row in rows}
        if args.record:
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
            record = {"benchmark": "throughput", "tolerance": TOLERANCE,
                      "ratios": {name: round(value, 3) for name, value in measured.items()},
                      "ranges": ranges, "rounds": rows[0]["rounds"], "trials": rows[0]["trials"],
                      "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                  "load_average_1min": load}}
            args.ratios.write_text(json.dumps(record, indent=2) + "\n")
            print(f"recorded {len(measured)} ratios in {args.ratios}")
            return 0
        record = load_record(args.ratios)
        checked = compare(measured, record)
    except SystemExit as error:
        print(error, file=sys.stderr)
        return 2
    print(f"{'case':<22} {'measured':>9} {'recorded':>9} {'bound':>7}  (median ratio to the noise floor)")
    for row in checked:
        print(f"{row['name']:<22} {row['measured']:>9.2f} {row['recorded']:>9.2f} {row['bound']:>7.2f}  "
              f"{'ok' if row['ok'] else 'SLOWER THAN RECORDED'}")
    failed = [row["name"] for row in checked if not row["ok"]]
    if failed:
        print(f"FAIL: {', '.join(failed)} more than {record['tolerance']:.0%} below the recorded ratio",
              file=sys.stderr)
        return 1
    print(f"ok: no case more than {record['tolerance']:.0%} below its recorded ratio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
