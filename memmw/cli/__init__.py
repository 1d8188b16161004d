"""The ``memmw`` command line (click); each command is a module in ``memmw.cli.commands``."""

from __future__ import annotations

from memmw.cli.app import COMMANDS, cli, main

__all__ = ["COMMANDS", "cli", "main"]
