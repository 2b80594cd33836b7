"""`python -m gpudisk_top` is the same as the `gpudisk-top` console script."""

import sys

from gpudisk_top.cli import main

sys.exit(main())
