"""``python -m groundscope``."""

import sys

from groundscope.cli import entry

sys.exit(entry())
