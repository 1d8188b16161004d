"""Shared set-up of the command-line tests."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No user state, keys or settings leak in; keyword-only unless a test says otherwise."""
    for name in list(os.environ):
        if name.startswith("MEMMW") or name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("MEMMW__PROVIDER", "none")
    level = logging.getLogger().level
    yield
    logging.getLogger().setLevel(level)
