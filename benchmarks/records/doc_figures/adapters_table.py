"""The figures of docs/guide.md's adapters table ("What the adapters found"), measured.

Run: ``python benchmarks/records/doc_figures/adapters_table.py`` (needs ``pip install -e ".[libraries]"``; about a
minute on one core). Each library mechanism is audited on its adapter's default pair at 10^5 trials per side,
confidence 0.95, ``delta = 1e-5``, seed 0, once with the ``gaussian`` score and once with ``float-bits``, and the
claim read from the library object is printed beside the bounds. OpenDP and python-dp draw their own noise from
the operating system (``seeded: false``): their bounds differ from run to run by the audit's own spread; the
diffprivlib rows are reproducible from the seed. The output is kept in ``adapters_table.txt`` beside this file,
which ``tests/package/test_doc_figures.py`` reads.
"""

from __future__ import annotations

import dpaudit

TRIALS, DELTA, SEED = 100_000, 1e-5, 0


def _rows() -> list[tuple[str, object, tuple[str, ...]]]:
    """``(row, mechanism, scores)`` in the table's order."""
    # the libraries are optional (dpaudit[libraries]): loaded when the script runs
    import opendp.prelude as dp
    from diffprivlib.mechanisms import Laplace
    from pydp.algorithms.laplacian import BoundedSum

    from dpaudit.mechanisms.adapters import from_diffprivlib, from_opendp, from_pydp

    dp.enable_features("contrib")
    laplace = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)) \
        >> dp.m.then_laplace(scale=1.0)
    gaussian = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)) \
        >> dp.m.then_gaussian(scale=1.0)
    both = ("gaussian", "float-bits")
    return [("diffprivlib Laplace(epsilon=1)", from_diffprivlib(Laplace(epsilon=1.0, sensitivity=1.0)), both),
            ("OpenDP vector Laplace, scale 1", from_opendp(laplace, 1.0), both),
            ("OpenDP vector Gaussian, scale 1", from_opendp(gaussian, 1.0), ("gaussian",)),
            ("python-dp BoundedSum(epsilon=1) over [0, 1]",
             from_pydp(BoundedSum, epsilon=1.0, lower_bound=0, upper_bound=1, dtype="float"), both)]


def main() -> None:
    print(f"{'library, mechanism':<45} {'claim':>7} {'score':<11} {'certified':>9} verdict")
    for row, mechanism, scores in _rows():
        for score in scores:
            result = dpaudit.audit(mechanism, dataset_pair=mechanism.neighbours(), score=score, trials=TRIALS,
                                   delta=DELTA, seed=SEED)
            relation = result.canary["relation"]  # the pair's relation: the claim for it is the library's
            claim = min(c.epsilon for c in result.claims if c.applicable and c.relation == relation)
            print(f"{row:<45} {claim:>7.3f} {score:<11} {result.epsilon_lower_bound:>9.3f} {result.verdict}",
                  flush=True)


if __name__ == "__main__":
    main()
