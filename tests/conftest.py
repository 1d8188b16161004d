"""Shared test configuration: hypothesis profiles (CI runs derandomized, so a red build
always reproduces; ``HYPOTHESIS_PROFILE=deep`` searches much harder on a workstation) and
the ``write()`` helper the test modules import (``from ..conftest import write``)."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("deep", max_examples=3000)
_profile = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else None)
if _profile:
    settings.load_profile(_profile)


def write(path: Path, text: str = "x\n") -> Path:
    """Write ``text`` (UTF-8) to ``path``, creating its folders; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
