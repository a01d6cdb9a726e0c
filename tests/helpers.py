"""Helpers shared by tests."""

from __future__ import annotations

from typing import Any

from dpaudit.audit.runner import RunOptions, run_audits


def run_documents(configs, options: RunOptions) -> list[dict[str, Any]]:
    """Run ``AuditConfig``s through the runner and return their JSON documents."""
    return [result.to_dict() for result in run_audits([config.job() for config in configs], options)]
