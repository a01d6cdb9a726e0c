"""One module per ``dpaudit`` subcommand; each exposes ``register(subparsers)``."""

from audit.commands import bound, listing

REGISTRARS = [listing.register, bound.register]
