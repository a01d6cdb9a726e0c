"""Whether progress is shown by default: the one switch the library's long calls read.

``DPAUDIT_PROGRESS`` (``0``: off, anything else: on) decides where it is
set; without it, progress shows when standard error is a terminal, so a
script run by hand shows it and a job whose output goes to a file or a pipe
stays quiet (``dpaudit run``, ``check`` and ``zoo`` show it there too unless
their JSON goes to stdout: ``enabled(without_terminal=True)``). A call's own
``progress=True`` or ``False`` (the CLI's ``--progress`` and ``--quiet``)
always wins.
"""

from __future__ import annotations

import os
import sys

__all__ = ["ENVIRONMENT", "enabled"]

#: the environment variable that forces progress on (any value but ``0``) or off (``0``)
ENVIRONMENT = "DPAUDIT_PROGRESS"


def enabled(*, without_terminal: bool = False) -> bool:
    """Whether progress shows by default (see the module docstring).

    Parameters
    ----------
    without_terminal : bool
        Show it also when standard error is no terminal (``dpaudit run`` does, unless its JSON goes to stdout):
        the environment variable still decides where it is set.
    """
    setting = os.environ.get(ENVIRONMENT)
    if setting is not None:
        return setting != "0"
    return without_terminal or sys.stderr.isatty()
