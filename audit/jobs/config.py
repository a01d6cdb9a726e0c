"""Audit configs in TOML: validation, defaults, sweeps and a stable hash.

A config has an optional top-level ``title`` and the tables ``[mechanism]``
(``name`` plus the mechanism's parameters), ``[canary]``, ``[attack]``,
``[audit]`` and an optional ``[sweep]`` whose lists expand into one audit
per combination. Configs are data: parsing never executes code, except the
model factory a config names itself (``model = "file.py:factory"``, loaded
from the config's folder). ``[audit] design = "one-run"`` and its keys are
read by :mod:`dpaudit.auditing.jobs.one_run_config`.

Errors are :class:`ConfigError` (a ``ParameterError``) naming the file, the
table, the key and the value.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import numbers
import re
import tomllib
from pathlib import Path
from typing import Any

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CANARY_KINDS, PAIRS, CanarySpec
from dpaudit.attacks.scores import AUTO, SCORES
from dpaudit.auditing.jobs.job import AuditJob
from dpaudit.auditing.jobs.config_targets import beside_config, check_target_keys
from dpaudit.auditing.jobs.job_designs import AuditOptions, ManyRuns, OneRun
from dpaudit.auditing.jobs.one_run_config import ANYTIME_KEYS, config_design, one_run_keys
from dpaudit.auditing.jobs.one_run_design import ONE_RUN_DEFAULTS, OneRunJob
from dpaudit.auditing.statistics.budget import MAX_SWEEP, Estimate
from dpaudit.auditing.statistics.settings import AUDIT_DEFAULTS, check_setting
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import suggestion
from dpaudit.mechanisms.models.user_model import UserModel, load_user_model
from dpaudit.mechanisms.user_code import load_object, parse_spec
from dpaudit.mechanisms.user_loss import is_user_loss

__all__ = ["AuditConfig", "ConfigError", "load_configs", "parse_config"]

TABLES = ("mechanism", "canary", "attack", "audit", "sweep")
CANARY_DEFAULTS: dict[str, Any] = {
    "kind": None, "index": None, "background": None, "pair": None, "direction": None, "seed": 0,
}
#: Keys of a scheduled canary (``attacks.schedules``): kept in the resolved config only when given, so the
#: ids of audits without a schedule do not change.
SCHEDULE_KEYS = ("every", "steps", "directions")
#: Canary keys kept in the resolved config only when given: the schedule's, and the target record of a model's
#: input canary (``CanarySpec.target``; a relative file is taken from the config's folder).
GIVEN_ONLY = (*SCHEDULE_KEYS, "target")
ATTACK_DEFAULTS: dict[str, Any] = {"score": AUTO}  # every registered score that applies (a portfolio)


class ConfigError(ParameterError):
    """An audit config is malformed; the message names table, key and value."""


class AuditConfig:
    """A validated, resolved audit (one combination of a sweep)."""

    def __init__(self, resolved: dict[str, Any], source: str) -> None:
        self.resolved = resolved
        self.source = source
        _load_user_model(resolved["mechanism"], source)
        self.mechanism = mechanisms.make(resolved["mechanism"]["name"], **{
            k: v for k, v in resolved["mechanism"].items() if k != "name"})
        canary = dict(resolved["canary"])
        self.canary = CanarySpec(**canary)
        resolved["canary"]["pair"] = self.canary.pair_for(self.mechanism)  # None: the mechanism's default
        self.score = resolved["attack"]["score"]
        self.audit = resolved["audit"]
        self.one_run = resolved.get("one_run")
        self.title = resolved.get("title") or f"{self.mechanism.name} audit"
        try:
            #: How the audit samples and certifies: ``ManyRuns`` from ``[audit]``, ``OneRun`` for
            #: ``design = "one-run"`` (``audit.jobs.job_designs``), ``Anytime`` for ``design = "anytime"``
            self.design: Any = config_design(self)
        except ParameterError as exc:  # names the config and the key already
            raise ConfigError(str(exc)) from None

    @property
    def options(self) -> AuditOptions:
        """What every design takes from the config: ``[audit]`` delta, confidence and seed, and the title."""
        return AuditOptions(delta=self.audit["delta"], confidence=self.audit["confidence"], seed=self.audit["seed"],
                            title=self.title)

    def job(self, *, sequential: bool = False) -> AuditJob | OneRunJob:
        """The audit to run, as its design builds it from the config (``sequential``: stop at the first certified
        violation, ``dpaudit check``)."""
        try:
            return self.design.config_job(self, sequential=sequential)
        except ParameterError as exc:  # names the config and the table already
            raise ConfigError(str(exc)) from None

    def check_budget(self, *, workers: int = 1, max_memory: int | None = None,
                     store: str | None = None) -> Estimate | None:
        """Refuse (``ConfigError`` naming the parameter) an audit that cannot fit the machine, before
        any dataset is built (``audit.statistics.budget``; a one-run audit has nothing to size)."""
        try:
            return self.design.check_config(self, workers=workers, max_memory=max_memory, store=store)
        except ParameterError as exc:  # names the config already
            raise ConfigError(str(exc)) from None

    @property
    def audit_id(self) -> str:
        """The id of :meth:`job` (config, datasets and code fingerprint)."""
        return self.job().audit_id

    def with_trials(self, trials: int) -> "AuditConfig":
        """The same audit with another trial count (``--trials``; the anytime design's budget; a design without
        trials, one run: itself)."""
        if self.resolved.get("anytime") is not None:
            resolved = copy.deepcopy(self.resolved)
            resolved["anytime"]["budget"] = trials
            return AuditConfig(resolved, self.source)
        if getattr(self.design, "trials", None) is None:
            return self
        resolved = copy.deepcopy(self.resolved)
        resolved["audit"]["trials"] = _check_audit_key("trials", trials, self.source)
        return AuditConfig(resolved, self.source)


def _load_user_model(mechanism: dict[str, Any], source: str) -> None:
    """Replace ``model = "file.py:factory"`` of mechanism ``model`` by the factory it names, a relative path
    taken from the config file's folder (``mechanisms.models.user_model``); errors name ``[mechanism] model``."""
    spec = mechanism.get("model")
    if mechanism.get("name") != "model" or not isinstance(spec, str) or ":" not in spec:
        return

    if isinstance(spec, UserModel):
        return
    base = Path(source).parent if source and not source.startswith("<") else None
    try:
        mechanism["model"] = load_user_model(spec, base=base)
    except ParameterError as exc:
        raise _fail(source, "mechanism", "model", str(exc).removeprefix("model: ")) from None


def _fail(source: str, table: str, key: str, message: str) -> ConfigError:
    where = f"[{table}] {key}" if key else f"[{table}]"
    return ConfigError(f"{source}: {where}: {message}")


def _check_audit_key(key: str, value: Any, source: str) -> Any:
    if key not in AUDIT_DEFAULTS:
        raise _fail(source, "audit", key,
                    f"unknown key (valid: {', '.join(AUDIT_DEFAULTS)}){suggestion(key, AUDIT_DEFAULTS)}")
    try:
        return check_setting(key, value)
    except ParameterError as exc:
        message = str(exc).removeprefix(f"{key} ")
        raise _fail(source, "audit", key, message) from None


def _with_defaults(raw: dict[str, Any], table: str, defaults: dict[str, Any], source: str) -> dict[str, Any]:
    """``defaults`` overridden by the table's keys; an unknown key is an error naming it."""
    values = dict(defaults)
    for key, value in raw.get(table, {}).items():
        if key not in defaults:
            raise _fail(source, table, key, f"unknown key (valid: {', '.join(defaults)}){suggestion(key, defaults)}")
        values[key] = value
    return values


MAX_CONFIG_BYTES = 2**24  #: 16 MiB
INT_LIMIT = 2**63 - 1  #: the largest integer the code can index with (int64)
MAX_DEPTH = 4  #: lists in lists deeper than this are not a parameter of any mechanism
MAX_ITEMS = 10**6  #: items in one list


def _check_values(raw: dict[str, Any], source: str) -> None:
    """Refuse integers beyond int64, deep nesting and huge lists, naming the key (before anything is built)."""
    def walk(value: Any, table: str, key: str, depth: int) -> None:
        if isinstance(value, dict):
            if depth > 1:
                hint = f'; quote dotted keys: "{key}.{next(iter(value), "key")}" = [...]' if table == "sweep" else ""
                raise _fail(source, table, key, f"must not be a table{hint}")
            for name, item in value.items():
                walk(item, table if depth else name, name if depth else "", depth + 1)
        elif isinstance(value, list):
            if depth - 1 > MAX_DEPTH:
                raise _fail(source, table, key, f"lists are nested more than {MAX_DEPTH} deep")
            if len(value) > MAX_ITEMS:
                raise _fail(source, table, key, f"a list of {len(value)} items, more than {MAX_ITEMS}")
            for item in value:
                walk(item, table, key, depth + 1)
        elif isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(value) > INT_LIMIT:
            raise _fail(source, table, key, f"the integer {str(value)[:30]} is beyond what can be indexed "
                                            f"(at most {INT_LIMIT})")
    walk(raw, "", "", 0)


def _resolve(raw: dict[str, Any], source: str) -> dict[str, Any]:
    unknown = [key for key in raw if key not in TABLES + ("title",)]
    if unknown:
        raise ConfigError(f"{source}: unknown table or key {unknown[0]!r} "
                          f"(valid: title, {', '.join('[' + t + ']' for t in TABLES)})")
    title = raw.get("title")
    if title is not None and not isinstance(title, str):
        raise ConfigError(f"{source}: title must be a string, got title={title!r}")
    for table in TABLES:
        if table in raw and not isinstance(raw[table], dict):
            raise ConfigError(f"{source}: {table} must be a table [{table}], got {raw[table]!r}")
    mechanism = _user_loss_path(dict(raw.get("mechanism", {})), source)
    if isinstance(mechanism.get("init"), str):  # given initial parameters of a model: a file beside the config
        mechanism["init"] = beside_config(mechanism["init"], source)
    if "name" not in mechanism:
        raise _fail(source, "mechanism", "name", f"missing (one of {', '.join(sorted(mechanisms.registered()))})")
    canary = _canary_table(raw, source)
    if canary["kind"] is not None and canary["kind"] not in CANARY_KINDS:
        raise _fail(source, "canary", "kind", f"must be one of {', '.join(CANARY_KINDS)}, got kind={canary['kind']!r}"
                    f"{suggestion(canary['kind'], CANARY_KINDS)}")
    if canary["pair"] is not None and canary["pair"] not in PAIRS:
        raise _fail(source, "canary", "pair", f"must be one of {', '.join(PAIRS)}, got pair={canary['pair']!r}")
    attack = _with_defaults(raw, "attack", ATTACK_DEFAULTS, source)
    chosen = attack["score"]
    if isinstance(chosen, list) and chosen and len(set(map(str, chosen))) == len(chosen):
        names = chosen  # a portfolio: one is chosen on calibration trials
    elif isinstance(chosen, list):
        raise _fail(source, "attack", "score", f"a list of scores must be non-empty and distinct, got score={chosen!r}")
    else:
        names = [] if chosen == AUTO else [chosen]
    for name in names:
        if not isinstance(name, str) or name not in SCORES:
            raise _fail(source, "attack", "score", f"must be one of {', '.join(SCORES)}, a list of them, or "
                        f"{AUTO!r} (every one that applies), got "
                        f"score={name!r}{suggestion(name, SCORES) if isinstance(name, str) else ''}")
    audit = dict(AUDIT_DEFAULTS)
    for key, value in raw.get("audit", {}).items():
        audit[key] = _check_audit_key(key, value, source)
    resolved = {"title": title, "mechanism": mechanism, "canary": canary, "attack": attack, "audit": audit}
    return resolved


def _user_loss_path(mechanism: dict[str, Any], source: str) -> dict[str, Any]:
    """A ``loss = "FILE.py:NAME"`` with a relative path, made absolute from the config's folder (loaded and
    checked with ``user_code.load_object``, ``base`` the folder): the audit is the same from any working
    directory."""
    spec = mechanism.get("loss")
    if not is_user_loss(spec):
        return mechanism
    try:
        path, name = parse_spec(spec, parameter="loss")
        base = Path(source).resolve().parent
        load_object(spec, parameter="loss", base=base)
    except ParameterError as exc:
        raise _fail(source, "mechanism", "loss", str(exc).removeprefix("loss: ")) from None
    if path.endswith(".py") and not Path(path).expanduser().is_absolute():
        mechanism["loss"] = f"{(base / path).resolve()}:{name}"
    return mechanism


def _canary_table(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """The ``[canary]`` table with its defaults, plus the keys of :data:`GIVEN_ONLY` that were given (``every``,
    ``steps``, ``directions``, ``target``; checked by ``CanarySpec``)."""
    table = raw.get("canary", {})
    schedule = {key: table[key] for key in GIVEN_ONLY if key in table}
    others = {key: value for key, value in table.items() if key not in GIVEN_ONLY}
    try:
        canary = _with_defaults({"canary": others}, "canary", CANARY_DEFAULTS, source)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("(valid: ", f"(valid: {', '.join(GIVEN_ONLY)}, ", 1)) from None
    if isinstance(schedule.get("target"), str):
        schedule["target"] = beside_config(schedule["target"], source)
    return {**canary, **schedule}


def _expand_sweep(raw: dict[str, Any], source: str) -> list[tuple[dict[str, Any], str]]:
    """Every combination of the ``[sweep]`` lists, with a label naming its swept values."""
    sweep = raw.get("sweep", {})
    if not sweep:
        return [(raw, "")]
    keys, lists = [], []
    for key, values in sweep.items():
        if not isinstance(values, list) or not values:
            raise _fail(source, "sweep", key, f"must be a non-empty list, got {key}={values!r}")
        table, _, name = key.rpartition(".")
        table = table or "mechanism"
        if table not in ("mechanism", "canary", "attack", "audit"):
            raise _fail(source, "sweep", key, "must name a mechanism parameter or table.key")
        _check_swept_key(raw, table, name, key, source)
        keys.append((table, name))
        lists.append(values)
    combinations = math.prod(len(values) for values in lists)
    if combinations > MAX_SWEEP:
        sizes = " x ".join(str(len(values)) for values in lists)
        raise _fail(source, "sweep", "", f"{sizes} = {combinations} combinations, more than {MAX_SWEEP}; "
                                         f"split the sweep into several configs")
    combos = []
    for values in itertools.product(*lists):
        variant = copy.deepcopy({k: v for k, v in raw.items() if k != "sweep"})
        for (table, name), value in zip(keys, values):
            variant.setdefault(table, {})[name] = value
        label = ", ".join(f"{key}={value}" for key, value in zip(sweep, values))
        combos.append((variant, label))
    return combos


def _check_swept_key(raw: dict[str, Any], table: str, name: str, key: str, source: str) -> None:
    """Refuse a ``[sweep]`` key that names no key of its table, naming ``[sweep]`` (the table's own check would
    blame the table the key was swept into)."""
    if table == "mechanism":
        mechanism = raw.get("mechanism", {}).get("name")
        registered = mechanisms.registered()
        if mechanism not in registered:
            return  # [mechanism] name is refused on its own
        valid = sorted(field.name for field in dataclasses.fields(registered[mechanism]))
        what = f"no parameter of mechanism {mechanism!r}"
    else:
        valid = list({"canary": (*CANARY_DEFAULTS, *GIVEN_ONLY), "attack": tuple(ATTACK_DEFAULTS),
                      "audit": (*AUDIT_DEFAULTS, "design", *ONE_RUN_DEFAULTS, *ANYTIME_KEYS)}[table])
        what = f"no key of [{table}]"
    if name not in valid:
        raise _fail(source, "sweep", key, f"names {what} (valid: {', '.join(valid)}){suggestion(name, valid)}")


def parse_config(raw: dict[str, Any], source: str = "<config>") -> list[AuditConfig]:
    """Validate a parsed TOML document; one :class:`AuditConfig` per sweep combination.

    Every key is used or refused: unknown keys, keys that do not apply to
    the chosen mechanism (``scale`` with Gaussian noise, ``radius`` on a box),
    a canary index on a mechanism without positions, a position listed twice
    and a canary ``seed`` without a random background are errors naming the
    key.
    """
    _check_values(raw, source)
    configs = []
    for variant, label in _expand_sweep(raw, source):
        try:
            variant, one_run = one_run_keys(variant, source)
        except ParameterError as exc:  # names the config and the key already
            raise ConfigError(str(exc)) from None
        resolved = _resolve(variant, source)
        anytime = one_run is not None and one_run.get("design") == "anytime"
        resolved["one_run"] = None if anytime else one_run
        if anytime:
            resolved["anytime"] = one_run
        try:
            config = AuditConfig(resolved, source)
            _check_applicable(config, variant, source)
            if config.canary.index != "all" or not config.mechanism.has_positions:
                config.canary.indices(config.mechanism)  # validates the index against n (without listing "all")
            if config.canary.scheduled:  # the schedule against the run: steps, directions, kind, pair
                config.canary.build(config.mechanism, None)
        except ParameterError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"{source}: {_table_of(exc)}{exc}") from None
        # fill the mechanism's defaults so the hash covers every parameter
        resolved["mechanism"] = {"name": config.mechanism.name, **config.mechanism.params}
        if label:  # sweep audits are told apart by their swept values
            resolved["title"] = f"{config.title} ({label})"
        resolved["canary"]["direction"] = (list(config.canary.direction)
                                           if isinstance(config.canary.direction, tuple) else config.canary.direction)
        _plain_schedule(resolved["canary"], config)
        configs.append(AuditConfig(resolved, source))
    return configs


def _plain_schedule(canary: dict[str, Any], config: AuditConfig) -> None:
    """The schedule keys as plain lists (JSON and the config hash)."""
    if "steps" in canary:
        canary["steps"] = list(config.canary.steps)
    if "directions" in canary:
        canary["directions"] = [list(row) for row in config.canary.directions]


def _check_applicable(config: AuditConfig, raw: dict[str, Any], source: str) -> None:
    """Keys the user gave that would have no effect are errors naming them."""
    unused = config.mechanism.inapplicable()
    for key in raw.get("mechanism", {}):
        if key in unused:
            raise _fail(source, "mechanism", key, f"does not apply to {config.mechanism.name} here "
                                                  f"({unused[key]}); remove it")
    canary = raw.get("canary", {})
    if "seed" in canary and config.canary.background != "random":
        raise _fail(source, "canary", "seed", f"seeds a random background only, but background="
                                              f"{config.canary.background!r}; remove it")
    check_target_keys(config.mechanism, config.canary, canary)
    if "direction" in canary and isinstance(config.canary.direction, tuple):
        dim = config.mechanism.canary_dim
        if len(config.canary.direction) != dim:
            raise _fail(source, "canary", "direction", f"must have {dim} numbers (the canary dimension of "
                                                       f"{config.mechanism.name}), got {len(config.canary.direction)}")


def _table_of(exc: Exception) -> str:
    text = str(exc)
    if text.startswith("canary"):
        return "[canary] "
    return "[mechanism] "


def _deep_key(text: str) -> str:
    """``[table] key`` of the first line whose value opens more than ``MAX_DEPTH`` lists (for tomllib's
    RecursionError, which names nothing)."""
    table = ""
    for line in text.splitlines():
        header = re.match(r"\s*\[([^\[\]]+)\]\s*(#.*)?$", line)
        if header:
            table = header.group(1).strip()
            continue
        value = re.match(r"\s*([A-Za-z0-9_.\-\"']+)\s*=\s*(\[[\s\[]*)", line)
        if value and value.group(2).count("[") > MAX_DEPTH:
            return f"[{table}] {value.group(1)}" if table else value.group(1)
    return "a value"


def load_configs(paths: list[str | Path]) -> list[AuditConfig]:
    """Read and validate TOML files (``ConfigError`` for missing, unreadable or bad files)."""
    configs: list[AuditConfig] = []
    for path in paths:
        file = Path(path)
        if file.is_dir():
            shown = str(path).rstrip("/")
            raise ConfigError(f"{path}: a directory, not a config file; name the files (e.g. {shown}/*.toml)")
        if not file.is_file():
            raise ConfigError(f"{path}: no such config file")
        if file.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {file.stat().st_size} bytes is too large for a config "
                              f"(at most {MAX_CONFIG_BYTES})")
        text = ""
        try:
            text = file.read_text(encoding="utf-8")
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc})") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a UTF-8 text file") from None
        except RecursionError:
            raise ConfigError(f"{path}: {_deep_key(text)}: lists are nested more than {MAX_DEPTH} deep") from None
        configs.extend(parse_config(raw, str(path)))
    return configs
