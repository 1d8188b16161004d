"""``memmw completion``: print the shell completion script (click's built-in completion)."""

from __future__ import annotations

import click

from memmw.cli.common import EXIT_OK, command, out

HELP = """Print the completion script for your shell.

\b
Examples (add the line to your shell's start-up file):
  eval "$(memmw completion bash)"        # ~/.bashrc
  eval "$(memmw completion zsh)"         # ~/.zshrc
  memmw completion fish | source         # ~/.config/fish/config.fish

Equivalent to click's _MEMMW_COMPLETE=<shell>_source memmw.
"""


@command(name="completion", help=HELP, short_help="Print the shell completion script.")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> int:
    """Print the script."""
    from click.shell_completion import get_completion_class

    from memmw.cli.app import cli

    cls = get_completion_class(shell)
    assert cls is not None  # the Choice above only admits shells click supports
    out(cls(cli, {}, "memmw", "_MEMMW_COMPLETE").source())
    return EXIT_OK
