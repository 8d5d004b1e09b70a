"""``python -m sealstore``: the same as the ``sealstore`` console script."""

import sys

from .cli import main

sys.exit(main())
