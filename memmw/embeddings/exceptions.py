"""Provider-layer exceptions, re-exported from :mod:`memmw.errors` (where they live)."""

from __future__ import annotations

from memmw.errors import BatchUnavailableError as BatchUnavailableError
from memmw.errors import MissingApiKeyError as MissingApiKeyError
