"""The ``memmw`` command group: lazy command loading, error handling and exit codes."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from memmw import __version__
from memmw.cli.common import (
    ENV_HELP,
    EXIT_BUSY,
    EXIT_CODES_HELP,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PipeClosed,
    global_options,
)

#: Command name -> ``module:attribute``. Adding a command = one module + one line here.
#: Modules load only when their command runs (or help lists them), keeping start-up fast.
COMMANDS: dict[str, str] = {
    "index": "memmw.cli.commands.index:index",
    "search": "memmw.cli.commands.search:search",
    "get": "memmw.cli.commands.get:get",
    "status": "memmw.cli.commands.status:status",
    "reset": "memmw.cli.commands.reset:reset",
    "watch": "memmw.cli.commands.watch:watch",
    "doctor": "memmw.cli.commands.doctor:doctor",
    "mcp": "memmw.cli.commands.mcp:mcp",
    "completion": "memmw.cli.commands.completion:completion",
    "facts": "memmw.cli.commands.facts:facts",
    "forget": "memmw.cli.commands.forget:forget",
    "graph": "memmw.cli.commands.graph:graph",
    "stats": "memmw.cli.commands.stats:stats",
    "state": "memmw.cli.commands.state:state",
    "backup": "memmw.cli.commands.backup:backup",
    "restore": "memmw.cli.commands.restore:restore",
    "consolidate": "memmw.cli.commands.consolidate:consolidate",
    "principals": "memmw.cli.commands.principals:principals",
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        cmd = getattr(importlib.import_module(module), attr)
        if not isinstance(cmd, click.Command):  # pragma: no cover - a wiring mistake
            raise TypeError(f"{target} is not a click command")
        return cmd


HELP = f"""Long-term memory for AI agents: index and search Markdown memory.

Markdown files are the source of truth (MEMORY.md, USER.md, memory/*.md); memmw keeps a
derived SQLite index per workspace and agent, and searches it by keyword and meaning.
Options such as --workspace or --json work before or after the command name.

\b
Examples:
  memmw index                      # build or refresh the index of the current folder
  memmw search "food allergies"    # best matching snippets with path:line citations
  memmw -w ~/agent get MEMORY.md --from 10 --lines 20
  memmw facts "where Ali lives"    # facts and relations from the notes, cited
  memmw status                     # last sync, vectors, what is degraded and why
  memmw doctor                     # check the setup and say what to fix
  memmw mcp                        # serve memory_search/get/append over MCP (stdio)

{EXIT_CODES_HELP}

{ENV_HELP}
"""


@click.group(
    cls=LazyGroup,
    invoke_without_command=True,
    help=HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(
    __version__, "--version", "-V", prog_name="memmw", message="%(prog)s %(version)s"
)
@global_options
@click.pass_context
def cli(ctx: click.Context) -> None:
    """The memmw command group."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(EXIT_OK)


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (errors print one line, no traceback)."""
    from memmw.errors import IndexBusyError, MemmwError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            result: Any = cli.main(args=args, prog_name="memmw", standalone_mode=False)
            code = result if isinstance(result, int) else EXIT_OK
            sys.stdout.flush()
            return code
        except PipeClosed:
            raise
        except click.exceptions.Exit as exc:
            sys.stdout.flush()
            return int(exc.exit_code)
        except click.Abort:
            click.echo("memmw: aborted", err=True)
            return EXIT_INTERRUPTED
        except click.UsageError as exc:
            exc.show()
            return EXIT_USAGE
        except click.ClickException as exc:
            exc.show()
            return exc.exit_code
        except IndexBusyError as exc:
            click.echo(f"memmw: busy: {exc}", err=True)
            return EXIT_BUSY
        except (MemmwError, OSError) as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            click.echo(f"memmw: error: {exc}", err=True)
            return EXIT_ERROR
        except KeyboardInterrupt:
            click.echo("memmw: interrupted", err=True)
            return EXIT_INTERRUPTED
        except Exception as exc:  # a bug: one line unless debugging
            if logging.getLogger().isEnabledFor(logging.DEBUG):
                raise
            click.echo(
                f"memmw: internal error: {type(exc).__name__}: {exc} "
                "(rerun with --log-level DEBUG for the traceback)",
                err=True,
            )
            return EXIT_ERROR
    except (BrokenPipeError, PipeClosed):
        # The reader went away (``memmw search x | head -2``): stop quietly, like head's
        # other producers do; nothing was lost, the reader asked for no more.
        _silence_stdout()
        return EXIT_OK
