"""The zoo of broken mechanisms the audit must catch, next to correct versions it must not flag."""

from dpaudit.audit.checks.zoo.realworld import REAL_WORLD, UserCodeVariant
from dpaudit.audit.checks.zoo.runner import ZooResult, run_zoo
from dpaudit.audit.checks.zoo.variants import VARIANTS, Variant, claimed_epsilon

__all__ = ["REAL_WORLD", "UserCodeVariant", "VARIANTS", "Variant", "ZooResult", "claimed_epsilon", "run_zoo"]
