"""The zoo of broken mechanisms the audit must catch, next to correct versions it must not flag.

Also the black-box benchmark suite (:func:`run_blackbox_suite`, docs/theory.md section 8).
"""

from dpaudit.auditing.checks.zoo.blackbox_suite import SUITE as BLACK_BOX_SUITE
from dpaudit.auditing.checks.zoo.blackbox_suite import run_blackbox_suite
from dpaudit.auditing.checks.zoo.realworld import REAL_WORLD, UserCodeVariant
from dpaudit.auditing.checks.zoo.runner import ZooResult, run_zoo
from dpaudit.auditing.checks.zoo.variants import VARIANTS, Variant, claimed_epsilon

__all__ = ["BLACK_BOX_SUITE", "REAL_WORLD", "UserCodeVariant", "VARIANTS", "Variant", "ZooResult", "claimed_epsilon", "run_blackbox_suite", "run_zoo"]
