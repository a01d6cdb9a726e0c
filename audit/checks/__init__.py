"""Checks built on audits: verdicts, regression assertions, the pytest plugin, neighbour search and the zoo."""
