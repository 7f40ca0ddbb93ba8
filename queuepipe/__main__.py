"""``python -m queuepipe``: the ``queuepipe`` command (see :mod:`queuepipe.cli`)."""

import sys

from queuepipe.cli import main

if __name__ == "__main__":
    sys.exit(main())
