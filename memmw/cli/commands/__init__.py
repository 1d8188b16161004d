"""One module per ``memmw`` command; register new ones in ``memmw.cli.app.COMMANDS``."""
