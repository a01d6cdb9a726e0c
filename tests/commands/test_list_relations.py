"""``dpaudit list`` states, beside each mechanism's parameters, the neighbouring relation a default audit uses and
where the claims' relations are listed (issue 73: Laplace's sensitivity was called "add/remove" while its default
audit is replace-one, with no word on the relation)."""

from __future__ import annotations

import dpaudit
from dpaudit.cli import main
from dpaudit.commands.listing import PAIR_FOR, catalogue


def test_the_listed_relation_is_the_one_a_default_audit_uses(capsys):
    entries = {entry["name"]: entry for entry in catalogue()["mechanisms"]}
    assert all("default_relation" in entry for entry in entries.values())  # every default builds
    for name in ("laplace", "gaussian", "shuffled-rr"):
        result = dpaudit.audit(dpaudit.make(name), trials=400, delta=1e-5, seed=0, score="projection")
        assert entries[name]["default_relation"] == result.canary["relation"], name
        assert PAIR_FOR[entries[name]["default_relation"]] == entries[name]["default_pair"]
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert ("a default audit uses replace-one neighbours (canary pair 'opposite'); each claim holds for the "
            "relation it is stated for (dpaudit bound laplace lists them)") in out
    assert "'remove' audits add-remove" in out
    from dpaudit.attacks.canaries import PAIR_FOR_RELATION  # the one mapping the CLI spells out without NumPy
    assert PAIR_FOR == PAIR_FOR_RELATION
