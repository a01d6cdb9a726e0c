"""Attacks: canaries that build neighbouring datasets, and distinguishing scores."""
