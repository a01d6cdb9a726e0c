"""Progress bars of long trainings: one per block of trials, on standard error, off when the audit is quiet.

A bar appears only once a block has trained for :data:`DELAY` seconds, so
short trainings print nothing. Whether bars are shown at all is a
process-wide switch: :func:`training_progress` sets it for a block of code
(the runner turns bars off when its own progress display is off, and the
CLI's ``--quiet`` does so through the runner); without it, bars follow the
environment variable ``DPAUDIT_PROGRESS`` (``0``: off), then whether
standard error is a terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from tqdm import tqdm

from dpaudit.core.progress import ENVIRONMENT as _ENVIRONMENT
from dpaudit.core.progress import enabled

__all__ = ["DELAY", "enabled", "training_bar", "training_progress"]

#: seconds a block trains before its bar appears
DELAY = 2.0


@contextlib.contextmanager
def training_progress(show: bool) -> Iterator[None]:
    """Show (or hide) training bars inside the block, in this process and in worker processes it starts."""
    before = os.environ.get(_ENVIRONMENT)
    os.environ[_ENVIRONMENT] = "1" if show else "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_ENVIRONMENT, None)
        else:
            os.environ[_ENVIRONMENT] = before


def training_bar(steps: int, description: str) -> tqdm:
    """A bar over a block's ``steps`` training steps (shown after :data:`DELAY` seconds, and only if :func:`enabled`)."""
    return tqdm(total=steps, desc=description, unit="step", file=sys.stderr, leave=False, delay=DELAY,
                disable=not enabled(), dynamic_ncols=True)
