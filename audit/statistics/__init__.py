"""Certified statistics: estimators, confidence and conditional bounds, thresholds, ceilings, budgets and one-run audits."""
