"""One module per ``dpaudit`` subcommand; each exposes ``register(subparsers)``."""

from dpaudit.commands import bound, estimate, gallery, listing, plan, report, run, search, zoo

REGISTRARS = [listing.register, bound.register, estimate.register, run.register, report.register,
              zoo.register, gallery.register, plan.register, search.register]
