"""Running audits: configs, jobs, the runner, the store, streaming certification, fingerprints, results and the Python API."""
