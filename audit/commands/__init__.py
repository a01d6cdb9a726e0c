"""One module per ``dpaudit`` subcommand; each exposes ``register(subparsers)``."""

from audit.commands import bound, estimate, listing

REGISTRARS = [listing.register, bound.register, estimate.register]
