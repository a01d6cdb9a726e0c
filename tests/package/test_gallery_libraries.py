"""The gallery section "real libraries": one audit per installed library and score, at the library's claim."""

from __future__ import annotations

import importlib.util
import pickle

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


def test_what_the_section_sends_to_workers_pickles():
    # the runner sends each worker a job's canary pair, which holds the mechanism (audit/jobs/runner.py, _Task):
    # an OpenDP measurement holds C pointers, so its mechanism must travel as the call that builds it again
    jobs, _ = libraries.library_jobs(200)
    if not jobs:
        pytest.skip("no DP library installed")
    for job in jobs:
        pair = pickle.loads(pickle.dumps(job.pairs[0]))
        assert pair.mechanism.params == job.mechanism.params, job.title
        if not job.title.startswith("opacus"):  # a value library: the copy releases numbers (Opacus trains)
            assert pair.mechanism.sample(pair.dataset_a, trials=5, seed=1).shape == (5, 1), job.title


def test_section_runs_with_the_gallerys_default_workers(tmp_path):
    # `dpaudit gallery` without --workers: a worker process per core, each sent pickled pairs (OpenDP's included)
    jobs, _ = libraries.library_jobs(200)
    jobs = [job for job in jobs if not job.title.startswith("opacus")]  # a training per trial: pickled above
    if not jobs:
        pytest.skip("no value library installed")
    results = run_audits(jobs, RunOptions(store=str(tmp_path / "g.sqlite"), progress=False))
    assert [result.title for result in results] == [job.title for job in jobs]
    assert all(result.empirical.trials == 200 for result in results)
