"""Consolidation: daily notes flow up into ``active-context.md`` and ``MEMORY.md``.

Candidates come from recall telemetry and activation without a model
(:func:`candidates_for`); a model proposes edits; six named gates
(:mod:`memmw.consolidation.gates`) must all pass before anything is written; the
written files' pre-images are kept so :func:`undo` restores them byte for byte.

Example:
    >>> from memmw.consolidation import consolidate, undo   # doctest: +SKIP
    >>> report = consolidate(mem, model)                     # doctest: +SKIP
    >>> report.status, report.gate                           # doctest: +SKIP
    ('refused', 'citations')
"""

from memmw.consolidation.candidates import Candidate, CandidateReport
from memmw.consolidation.gates import GATES, GateResult
from memmw.consolidation.providers import chat_model
from memmw.consolidation.run import (
    ConsolidationReport,
    UndoReport,
    candidates_for,
    consolidate,
    undo,
)
from memmw.consolidation.schedule import (
    ConsolidationScheduler,
    consolidate_after_archive,
    run_in_background,
)

__all__ = [
    "GATES",
    "Candidate",
    "CandidateReport",
    "ConsolidationReport",
    "ConsolidationScheduler",
    "GateResult",
    "UndoReport",
    "candidates_for",
    "chat_model",
    "consolidate",
    "consolidate_after_archive",
    "run_in_background",
    "undo",
]
