"""``python -m sealstore.bench``: the same as ``sealstore bench``."""

import sys

from .run import main

sys.exit(main())
