"""Config keys of a model's target record and start: files beside the config, and the checks before any trial.

``[canary] target`` (``CanarySpec.target``) and ``pair = "replace"`` need an
input canary of a mechanism that trains a model; a target that does not fit
the data, or a pair the mechanism's sampling cannot realise (``remove``
without Poisson batches), is refused when the config is read, naming the key.
A relative ``target`` or ``[mechanism] init`` file is taken from the config's
folder, as ``model = "file.py:factory"`` is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpaudit.attacks.canaries import CanarySpec
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.base import Mechanism

__all__ = ["beside_config", "check_target_keys"]


def beside_config(value: str, source: str) -> str:
    """A relative path that names a file in the config's folder, made absolute (configs run from anywhere);
    any other string (a name, an absolute path, a missing file) unchanged."""
    path = Path(value).expanduser()
    if path.is_absolute() or not path.suffix:
        return value
    beside = Path(source).resolve().parent / path
    return str(beside) if beside.is_file() else value


def check_target_keys(mechanism: Mechanism, spec: CanarySpec, given: dict[str, Any]) -> None:
    """Refuse ``target`` or ``pair = "replace"`` without an input canary of a model, a target that does not fit the
    data, and a pair the mechanism cannot realise (``ParameterError`` naming ``canary`` and the key)."""
    kind = spec.kind or (mechanism.canary_kinds[0] if mechanism.canary_kinds else None)
    for key, value in (("target", given.get("target")), ("pair", given.get("pair"))):
        if value is None or (key == "pair" and value != "replace"):
            continue
        if kind != "input" or not mechanism.chooses_targets:
            raise ParameterError(f"canary {key}={value!r} needs an input canary of a mechanism that trains a model, "
                                 f"got kind={kind!r} of {mechanism.name!r}")
    if given.get("target") is not None:
        mechanism.check_input_target(spec.target)
    if spec.pair is not None and not spec.scheduled:
        mechanism.pair_relation(spec.pair)
