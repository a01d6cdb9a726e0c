"""``dpaudit.audit`` shows progress by default where a person watches (issue 73): on when standard error is a
terminal or ``DPAUDIT_PROGRESS`` forces it, off when it is ``0``, and a call's own ``progress=`` always wins."""

from __future__ import annotations

import pytest

import dpaudit

GAUSSIAN = {"trials": 2_000, "delta": 1e-5, "seed": 0}


@pytest.mark.parametrize(("environment", "argument", "shown"), [
    ("1", None, True),     # forced on, as a terminal would
    ("0", None, False),    # forced off
    (None, None, False),   # pytest's stderr is no terminal: off by default
    ("1", False, False),   # the call's own choice wins ...
    ("0", True, True),     # ... either way
])
def test_audit_progress_follows_the_terminal_unless_the_call_says(monkeypatch, capfd, environment, argument, shown):
    if environment is None:
        monkeypatch.delenv("DPAUDIT_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("DPAUDIT_PROGRESS", environment)
    dpaudit.audit(dpaudit.make("gaussian", sigma=2.0), progress=argument, **GAUSSIAN)
    err = capfd.readouterr().err
    assert ("sampling" in err) == shown, err


def test_a_terminal_turns_progress_on(monkeypatch, capfd):
    monkeypatch.delenv("DPAUDIT_PROGRESS", raising=False)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    dpaudit.audit(dpaudit.make("gaussian", sigma=2.0), **GAUSSIAN)
    assert "sampling" in capfd.readouterr().err
