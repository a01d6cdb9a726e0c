"""One module per ``dpaudit`` subcommand; each exposes ``register(subparsers)``."""

from audit.commands import listing

REGISTRARS = [listing.register]
