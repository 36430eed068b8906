"""``python -m groundscope``."""

import sys

from groundscope.cli import main

sys.exit(main())
