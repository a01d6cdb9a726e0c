"""A violation under a relation the mechanism's own claim is not made for says so, and names the pair that audits
the relation it is made for (issue 73): Laplace noise of scale 1 on a sum of add/remove sensitivity 1 is
1-DP under add/remove and 2-DP under replace-one, the relation ``assert_private`` audits by default."""

from __future__ import annotations

import pytest

import dpaudit


def test_epsilon_of_another_relation_is_named_with_the_pair_that_audits_it():
    laplace = dpaudit.make("laplace", scale=1.0)
    with pytest.raises(dpaudit.PrivacyViolation) as caught:
        dpaudit.assert_private(laplace, epsilon=1.0, delta=0.0, trials=8_000, seed=0)
    message = str(caught.value)
    assert "replace-one" in message  # the violation stands: epsilon=1 was asserted for the relation audited
    assert ("The mechanism claims epsilon 1 under add-remove (laplace-exact), not under replace-one, the relation "
            "audited, where its claim is 2 (laplace-exact) and is not exceeded") in message
    assert "pass canary={'pair': 'remove'} to audit that relation" in message
    # ... and that pair audits the claim made for add/remove: no violation
    summary = dpaudit.assert_private(laplace, epsilon=1.0, delta=0.0, trials=8_000, seed=0, canary={"pair": "remove"})
    assert summary["result"].canary["relation"] == "add-remove" and not summary["violation"]


def test_no_hint_where_no_relation_makes_the_asserted_epsilon_true():
    laplace = dpaudit.make("laplace", scale=1.0)  # 1-DP at best (add/remove): 0.5 holds under no relation
    with pytest.raises(dpaudit.PrivacyViolation) as caught:
        dpaudit.assert_private(laplace, epsilon=0.5, delta=0.0, trials=8_000, seed=0)
    assert "The mechanism claims" not in str(caught.value)
