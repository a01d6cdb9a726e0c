"""Audits: configs, the runner, the store, certified estimators and verdicts."""
