"""``python -m polyop``: runs the polyop binary installed with the package, or says how to get it."""

import sys

from polyop._binary import main

if __name__ == "__main__":
    sys.exit(main())
