"""A loss of the user's own is part of the audit's identity: a changed file changes the audit id."""

from __future__ import annotations

from dpaudit.auditing.jobs.config import load_configs

LOSS = '''
def grad(w, record):
    return SCALE * w + record


SCALE = {scale}
'''


def test_a_changed_loss_file_changes_the_audit_id(tmp_path):
    (tmp_path / "my_loss.py").write_text(LOSS.format(scale=0.5))
    config = tmp_path / "audit.toml"
    config.write_text('[mechanism]\nname = "dp-sgd"\nn = 4\nbatch_size = 2\nsteps = 3\nloss = "my_loss.py:grad"\n'
                      '[canary]\nevery = 1\n')
    first = load_configs([config])[0]
    before = first.audit_id  # the id reads the code as it is now
    assert first.mechanism.user_loss is not None and first.resolved["mechanism"]["loss"].endswith("my_loss.py:grad")
    assert load_configs([config])[0].audit_id == before  # unchanged code: the same audit
    (tmp_path / "my_loss.py").write_text(LOSS.format(scale=0.25))
    changed = load_configs([config])[0]
    assert changed.mechanism.user_loss(*_probe()).tolist() == [[0.25]]
    assert changed.audit_id != before


def _probe():
    import torch

    return torch.ones((1, 1), dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
