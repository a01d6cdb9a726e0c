"""A dp-accounting release that cannot account Poisson-subsampled Gaussian steps under replace-one (the declared
floor raises ``UnsupportedEventError``) makes that claim not applicable, with the reason, instead of failing."""

from __future__ import annotations

from dpaudit.mechanisms.accounting import tight


class UnsupportedEventError(Exception):
    """The name dp-accounting gives the error."""


def test_an_unsupported_relation_is_a_claim_not_applicable(monkeypatch):
    def refuse(*args, **kwargs):
        raise UnsupportedEventError("neighboring_relation must be ADD_OR_REMOVE_ONE")

    monkeypatch.setattr(tight, "_pld", refuse)
    claim = tight.pld_claim("sgm-pld-replace", sampling_rate=0.1, noise_multiplier=1.0, steps=10,
                            relation="replace-one")
    assert not claim.applicable and "does not account" in claim.reason and "replace-one" in claim.reason
