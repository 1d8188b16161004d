"""Lifecycle hooks of the agent middleware (bootstrap, session archive, flush, user callbacks).

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""

from memmw.hooks.registry import (
    Event as Event,
)
from memmw.hooks.registry import (
    HookCallback as HookCallback,
)
from memmw.hooks.registry import (
    HookContext as HookContext,
)
from memmw.hooks.registry import (
    HookRegistry as HookRegistry,
)
