"""The gallery section "real libraries": one audit per installed library and score, at the library's claim."""

from __future__ import annotations

import importlib.util

import pytest

from dpaudit.auditing.jobs.runner import RunOptions, run_audits
from dpaudit.gallery import libraries


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_section_audits_each_installed_library_at_its_own_claim():
    jobs, missing = libraries.library_jobs(2_000)
    expected = {"diffprivlib": "diffprivlib", "opendp": "opendp", "python-dp": "pydp", "opacus": "opacus"}
    assert set(missing) == {name for name, module in expected.items() if not _installed(module)}
    if not jobs:
        pytest.skip("no DP library installed")
    # the value libraries' default pairs replace a record; Opacus's removes one (its accountant's relation)
    relations = {job.title.split(":")[0]: str(job.pairs[0].relation) for job in jobs}
    assert all(relation == ("add-remove" if library == "opacus" else "replace-one")
               for library, relation in relations.items())
    results = run_audits(jobs, RunOptions(store=":memory:", workers=1))
    for job, result in zip(jobs, results):
        own = [c for c in result.claims if c.applicable and c.relation == str(job.pairs[0].relation)]
        assert own, result.title  # judged against a claim read from the library object
        assert result.attack["score"] in result.title
    by_title = {r.title: r for r in results}
    if _installed("diffprivlib"):  # the float leak of `value - scale * laplace`, 2,000 trials suffice
        assert by_title["diffprivlib: Laplace, score float-bits"].verdict == "violation"
    if _installed("opacus"):
        assert next(r for r in results if r.title.startswith("opacus")).empirical.trials == 100
