"""Facts proposed by an optional extractor (a user callable, e.g. an LLM), written as Markdown."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memmw.errors import PathPolicyError
from memmw.redaction import redact_secrets
from memmw.workspace.files import MEMORY_DIR, append_text, resolve_read_path

log = logging.getLogger(__name__)

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True, kw_only=True)
class ProposedFact:
    """One fact an extractor proposes: ``entity.key = value`` (``[[value]]`` for a relation)."""

    entity: str
    key: str
    value: str
    valid_from: str | None = None
    relation: bool = False


#: ``text -> facts``: mappings with entity/key/value (valid_from, relation optional),
#: ``(entity, key, value)`` tuples or :class:`ProposedFact`.
Extractor = Callable[[str], Iterable[Any]]


def _one_line(text: Any, limit: int) -> str:
    out = " ".join(str(text).split())
    return out.lstrip("#>-*+ ").replace("[[", "").replace("]]", "").replace("~~", "")[:limit].strip()


def coerce_fact(item: Any) -> ProposedFact | None:
    """A clean :class:`ProposedFact` from what an extractor returned, or None if unusable.

    Values are flattened to one line (a proposal can never add headings or other entries).
    """
    if isinstance(item, ProposedFact):
        raw: Mapping[str, Any] = item.__dict__
    elif isinstance(item, Mapping):
        raw = item
    elif isinstance(item, (tuple, list)) and len(item) == 3:
        raw = {"entity": item[0], "key": item[1], "value": item[2]}
    else:
        return None
    entity = _one_line(raw.get("entity", ""), 80)
    key = _one_line(raw.get("key", ""), 40).replace(":", " ").strip()
    value = _one_line(raw.get("value", ""), 500)
    valid = raw.get("valid_from")
    valid_from = str(valid) if valid is not None and _DATE.match(str(valid)) else None
    if not entity or not key or not value or len(key.split()) > 4:
        return None
    return ProposedFact(
        entity=entity, key=key, value=value, valid_from=valid_from, relation=bool(raw.get("relation"))
    )


def render_facts(facts: Iterable[ProposedFact]) -> str:
    """Markdown in the fact syntax: one ``##`` section per entity, one line per fact."""
    sections: dict[str, list[str]] = {}
    for fact in facts:
        if fact.relation:
            line = f"- {fact.key.replace(' ', '_')} [[{fact.value}]]"
        else:
            since = f" (since {fact.valid_from})" if fact.valid_from else ""
            line = f"- {fact.key}: {fact.value}{since}"
        sections.setdefault(fact.entity, []).append(line)
    return "".join(f"\n## {entity}\n" + "\n".join(lines) + "\n" for entity, lines in sections.items())


def write_facts(workspace: Path, path: str, facts: Iterable[Any]) -> tuple[str, int]:
    """Append proposed facts to a ``memory/`` note (the Markdown first, never only the index).

    Returns:
        ``(workspace-relative path, number of facts written)``.

    Raises:
        PathPolicyError: ``path`` is not a note under ``memory/``.
    """
    rel, abs_path = resolve_read_path(Path(workspace), path)
    if not rel.startswith(MEMORY_DIR + "/"):
        raise PathPolicyError(f"proposed facts go to a note under memory/, not {rel}")
    clean = [f for f in (coerce_fact(item) for item in facts) if f is not None]
    if clean:
        append_text(abs_path, redact_secrets(render_facts(clean)))
        log.info("wrote %d proposed facts to %s", len(clean), rel)
    return rel, len(clean)
