"""One module per ``dpaudit`` subcommand; each exposes ``register(subparsers)``."""

from dpaudit.audit.commands import bound, estimate, listing, report, run, zoo

REGISTRARS = [listing.register, bound.register, estimate.register, run.register, report.register,
              zoo.register]
