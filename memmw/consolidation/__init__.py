"""Consolidation: daily notes flow up into ``active-context.md`` and ``MEMORY.md``.

Gated, cited and reversible. Internal package: import its public names from
:mod:`memmw.consolidation.api` re-exported here.
"""
