"""The ``memmw`` command line (click); each command is a module in ``memmw.cli.commands``.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""

from __future__ import annotations

from memmw.cli.app import (
    COMMANDS as COMMANDS,
)
from memmw.cli.app import (
    cli as cli,
)
from memmw.cli.app import (
    main as main,
)
