"""One module per ``memmw`` command; register new ones in ``memmw.cli.app.COMMANDS``.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""
