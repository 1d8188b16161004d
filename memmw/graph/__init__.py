"""Active memory's knowledge graph: facts, relations and aliases derived from the Markdown."""

from memmw.graph.syntax import (
    AliasRow,
    EntityRow,
    FactRow,
    ParsedNote,
    RelationRow,
    TriggerRow,
    normalize_key,
    normalize_name,
    parse_note,
)

__all__ = [
    "AliasRow",
    "EntityRow",
    "FactRow",
    "ParsedNote",
    "RelationRow",
    "TriggerRow",
    "normalize_key",
    "normalize_name",
    "parse_note",
]
