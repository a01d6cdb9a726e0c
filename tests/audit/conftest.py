"""Shared helpers for the runner tests: small configs written to tmp files."""

from __future__ import annotations

from pathlib import Path

import pytest

SMALL = """
title = "small pnsgd"
[mechanism]
name = "pnsgd"
n = 6
dim = 2
eta = 0.2
sigma = 1.0
domain = "ball"
[canary]
kind = "gradient"
index = [1, 6]
[audit]
trials = 3000
chunk_size = 700
seed = 5
"""


@pytest.fixture
def write_config(tmp_path):
    def write(text: str, name: str = "audit.toml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return write
