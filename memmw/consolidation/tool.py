"""``memory_consolidate``: the consolidation as a tool (the MCP server offers it).

Direct (private) sessions only: candidates come from private daily notes. ``run``
starts the consolidation in the background and answers at once (a run calls a model
and never holds up the caller's turn); ``last`` reports how the newest run ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memmw.agent.chat import ChatModel
from memmw.agent.tools import MemoryTool
from memmw.chat_type import chat_type_for, principal_for
from memmw.consolidation import journal
from memmw.consolidation.providers import chat_model
from memmw.consolidation.run import candidates_for, undo
from memmw.consolidation.schedule import run_in_background

if TYPE_CHECKING:
    from memmw.engine.memory import Memory

ACTIONS = ("candidates", "run", "undo", "last")
#: Candidates a tool payload lists at most.
MAX_LISTED = 20


def consolidation_tools(
    memory: Memory,
    *,
    model: ChatModel | None = None,
    session_key: str | None = None,
    chat_type: str | None = None,
    principal: str | None = None,
) -> list[MemoryTool]:
    """``[memory_consolidate]`` for the owner's direct session, ``[]`` for a group or
    channel one and for a person's (a principal's) session: consolidation edits the
    owner's curated files.

    Args:
        memory: The engine.
        model: The model runs use (default the configured ``consolidation.provider``).
        session_key / chat_type / principal: The session (fails closed: groups and
            other people get no tool).
    """
    config = memory.config
    private = chat_type_for(session_key, chat_type, config.private_chat_types) == "direct"
    if not private or not config.enabled:
        return []
    person = principal_for(
        session_key,
        chat_type,
        principal,
        dm_scope=config.dm_scope,
        owner_principals=config.owner_principals,
        private_kinds=config.private_chat_types,
    )
    if person is not None:
        return []

    def handler(args: Mapping[str, Any]) -> dict[str, Any]:
        action = args.get("action", "candidates")
        if action not in ACTIONS:
            return {"error": f"action must be one of {', '.join(ACTIONS)}; got {action!r}"}
        if action == "candidates":
            report = candidates_for(memory)
            return {
                "candidates": [c.to_dict() for c in report.candidates[:MAX_LISTED]],
                "judged": len(report.entries),
                "notes": report.notes,
            }
        if action == "undo":
            return undo(memory).to_dict()
        if action == "last":
            kept = journal.runs(memory.state_dir)
            if not kept:
                return {"status": "none"}
            newest = kept[0].data
            return {
                "run_id": newest.get("id"),
                "state": newest.get("state"),
                "targets": [t.get("path") for t in newest.get("targets", [])],
            }
        chosen = model or chat_model(memory.config.consolidation)
        if chosen is None:
            return {"error": "no chat model configured: set [consolidation] provider in memmw.toml"}
        run_in_background(memory, chosen)
        return {"status": "started", "note": "runs in the background; action 'last' reports it"}

    return [
        MemoryTool(
            name="memory_consolidate",
            description=(
                "Consolidate memory: 'candidates' lists daily-note entries recalled often "
                "enough to promote into MEMORY.md, with reasons; 'run' starts a gated, cited "
                "consolidation in the background; 'last' says how the newest run ended; "
                "'undo' restores the files the newest run changed."
            ),
            parameters={
                "type": "object",
                "properties": {"action": {"type": "string", "enum": list(ACTIONS)}},
                "additionalProperties": False,
            },
            handler=handler,
        )
    ]
