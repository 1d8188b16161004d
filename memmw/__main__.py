"""``python -m memmw`` runs the command line."""

import sys

from memmw.cli import main

sys.exit(main())
