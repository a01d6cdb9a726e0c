"""The base room: what every layer may import (errors, parameter checks, closed vocabularies).

It imports nothing else of the package, and nothing heavy (no NumPy, torch
or SciPy), so the command line's start-up can use it.
"""
