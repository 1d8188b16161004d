"""The exception tree: every memmw error class lives in ``memmw.errors`` (one home)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import memmw
from memmw import errors

PACKAGE = Path(memmw.__file__).resolve().parent


def error_classes() -> set[str]:
    return {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, errors.MemmwError)
    }


def foreign_error_classes(sources: dict[str, str], known: set[str]) -> list[str]:
    """``module:line class`` of each class deriving from a memmw error outside errors.py.

    A derived class is a memmw error too, so the names found feed the next pass until
    nothing new appears (a grandchild defined beside its parent is caught as well).
    """
    found: list[str] = []
    bases_known = set(known)
    changed = True
    seen: set[str] = set()
    while changed:
        changed = False
        for module, text in sorted(sources.items()):
            for node in ast.walk(ast.parse(text)):
                if not isinstance(node, ast.ClassDef):
                    continue
                names = {
                    b.id if isinstance(b, ast.Name) else b.attr
                    for b in node.bases
                    if isinstance(b, (ast.Name, ast.Attribute))
                }
                where = f"{module}:{node.lineno} {node.name}"
                if names & bases_known and where not in seen:
                    seen.add(where)
                    found.append(where)
                    bases_known.add(node.name)
                    changed = True
    return sorted(found)


def test_every_error_class_is_defined_in_errors() -> None:
    sources = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts): p.read_text(encoding="utf-8")
        for p in PACKAGE.rglob("*.py")
        if p.name != "errors.py" or p.parent != PACKAGE
    }
    assert foreign_error_classes(sources, error_classes()) == []


def test_the_checker_finds_an_error_class_defined_elsewhere() -> None:
    sources = {
        "memmw.embeddings.query": "class QueryTimeoutError(ProviderError):\n    pass\n",
        "memmw.engine.backup": "class ArchiveError(errors.ConfigError):\n    pass\n"
        "class Worse(ArchiveError):\n    pass\n",
        "memmw.cli.common": "class PipeClosed(Exception):\n    pass\n",
    }
    assert foreign_error_classes(sources, {"ProviderError", "ConfigError"}) == [
        "memmw.embeddings.query:1 QueryTimeoutError",
        "memmw.engine.backup:1 ArchiveError",
        "memmw.engine.backup:3 Worse",
    ]


def test_old_import_places_give_the_same_classes() -> None:
    from memmw.embeddings.breaker import CircuitOpenError
    from memmw.embeddings.exceptions import BatchUnavailableError, MissingApiKeyError
    from memmw.embeddings.query import QueryTimeoutError
    from memmw.engine.backup import ArchiveError
    from memmw.store.vectors import InvalidVectorError

    assert (CircuitOpenError, BatchUnavailableError, MissingApiKeyError) == (
        errors.CircuitOpenError,
        errors.BatchUnavailableError,
        errors.MissingApiKeyError,
    )
    assert (QueryTimeoutError, ArchiveError, InvalidVectorError) == (
        errors.QueryTimeoutError,
        errors.ArchiveError,
        errors.InvalidVectorError,
    )
    assert issubclass(errors.ArchiveError, ValueError)
    assert issubclass(errors.MissingApiKeyError, errors.ProviderUnavailableError)
