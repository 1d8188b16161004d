"""Provider-layer exceptions that refine the ones in :mod:`memmw.errors`."""

from __future__ import annotations

from memmw.errors import ProviderError, ProviderUnavailableError


class MissingApiKeyError(ProviderUnavailableError):
    """A remote provider has no API key; ``auto`` skips to the next provider on this error."""


class BatchUnavailableError(ProviderError):
    """A provider batch API failed; the caller falls back to plain requests.

    Attributes:
        timed_out: True when the batch did not finish within the configured time.
        not_available: True when the endpoint says batch mode is not available at all.
    """

    def __init__(self, message: str, *, timed_out: bool = False, not_available: bool = False):
        super().__init__(message)
        self.timed_out = timed_out
        self.not_available = not_available
