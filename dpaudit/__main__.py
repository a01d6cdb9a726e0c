"""``python -m dpaudit``: the command line (same as the ``dpaudit`` script)."""

import sys

from dpaudit.cli import main

if __name__ == "__main__":
    sys.exit(main())
