"""Shared scenario fixtures for the adapter tests: a workspace, a fixed clock, a scripted model."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memmw.config import FlushConfig, MemoryConfig
from memmw.engine.memory import Memory
from memmw.hooks.registry import Event, HookContext
from memmw.middleware import MemoryMiddleware
from memmw.text.tokens import TokenCounter

# 2026-03-10 14:05 UTC is 15:05 in Paris: archives are named ...-1505.md.
NOW = dt.datetime(2026, 3, 10, 14, 5, 30, tzinfo=dt.timezone.utc)
TODAY = "2026-03-10"
FLUSH_MARK = "Memory flush before compaction"
FILLER = "lorem ipsum dolor sit amet " * 90  # ~2400 chars, ~600 estimated tokens


#: Every NO_REPLY form tried, and what a person may see of it (None = nothing at all).
NO_REPLY_FORMS: list[tuple[str, str | None]] = [
    ("NO_REPLY", None),
    ("no_reply", None),
    ("  NO_REPLY \n", None),
    ("NO_REPLY.", None),
    ("NO_REPLY!", None),
    ("**NO_REPLY**", None),
    ("`NO_REPLY`", None),
    ("NO_REPLY: nothing to add", None),
    ("NO_REPLY - not for me", None),
    ('{"action": "NO_REPLY"}', None),
    ('{ "action" : "no_reply" }', None),
    ("Saved the note. NO_REPLY", "Saved the note."),
    ("Done.**NO_REPLY**", "Done."),
    ("ok NO_REPLY.", "ok"),
    ("NO_REPLY\n\nHere is the answer.", "Here is the answer."),
    ("No, I disagree.", "No, I disagree."),
    ("NOPE", "NOPE"),
    ("Plan N", "Plan N"),
    ("FOO_NO_REPLY", "FOO_NO_REPLY"),
    ("The NO_REPLY token is special.", "The NO_REPLY token is special."),
    # Issue 19: forms that reached the user on c5acdd4 in at least one mode.
    ("NO_\u200bREPLY", None),  # zero-width space inside
    ("NO_RE\u200dPLY", None),  # zero-width joiner
    ("NO\u00ad_REPLY", None),  # soft hyphen
    ("NO_REP\u2060LY", None),  # word joiner
    ("\ufeffNO_REPLY", None),  # BOM
    ("“NO_REPLY”", None),
    ("«NO_REPLY»", None),
    ("‘NO_REPLY’", None),
    ("ＮＯ＿ＲＥＰＬＹ", None),  # fullwidth (NFKC)
    ("NO\\_REPLY", None),  # Markdown escape
    ('```json\n{"action":"NO_REPLY","reason":"nothing new to add"}\n```', None),
    ('{"action": "NO_REPLY", "reason": "not for me"}', None),
    ('{"reply": "no_reply"}', None),
    ("   ", None),  # whitespace only
    ("\n\n", None),
    ("<|endoftext|>", None),
    ("<|im_end|>", None),
    ("</s>", None),
    ("<|eot_id|>", None),
    ("<end_of_turn>", None),
    ("NO_REPLY<|im_end|>", None),
    ("Here you go.<|eot_id|>", "Here you go."),
    ("Saved. “NO_REPLY”", "Saved."),
]


def fixed_clock() -> dt.datetime:
    return NOW


@dataclass
class Scenario:
    """A workspace with memory, a middleware and a log of what the fake model saw."""

    workspace: Path
    state_dir: Path
    memory: Memory
    middleware: MemoryMiddleware
    flush_calls: list[list[dict[str, Any]]] = field(default_factory=list)
    main_calls: list[list[dict[str, Any]]] = field(default_factory=list)
    events: list[HookContext] = field(default_factory=list)
    flush_reply: str = "NO_REPLY"

    def flush_events(self) -> list[HookContext]:
        return [e for e in self.events if e.event is Event.FLUSH]

    def compaction_events(self) -> list[HookContext]:
        return [e for e in self.events if e.event is Event.COMPACTION]


def make_workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(
        "# Memory\n\n- The gateway runs on port 8443 behind nginx.\n- SECRET-CURATED-FACT\n",
        encoding="utf-8",
    )
    (ws / "USER.md").write_text("# User\n\nName: Ada. Prefers short answers.\n", encoding="utf-8")
    (ws / "memory" / f"{TODAY}.md").write_text(
        "# Daily\n\n- Deployed the billing service.\n", encoding="utf-8"
    )
    return ws


def flush_config() -> FlushConfig:
    # Flush at 2500 tokens of the next call; the custom loop compacts at 3000.
    return FlushConfig(context_window=4000, reserve_tokens_floor=1000, soft_threshold_tokens=500)


@pytest.fixture
def scenario_factory(tmp_path: Path) -> Iterator[Callable[..., Scenario]]:
    made: list[Scenario] = []

    def make(
        *,
        read_only: bool | None = None,
        slug_fn: Callable[[str], str] | None = None,
        force_flush_bytes: int = 0,
    ) -> Scenario:
        root = tmp_path / f"s{len(made)}"
        ws = make_workspace(root)
        base = flush_config()
        config = MemoryConfig(
            provider="none",
            user_timezone="Europe/Paris",
            flush=FlushConfig(
                context_window=base.context_window,
                reserve_tokens_floor=base.reserve_tokens_floor,
                soft_threshold_tokens=base.soft_threshold_tokens,
                force_flush_transcript_bytes=force_flush_bytes,
            ),
        )
        memory = Memory(workspace=ws, state_dir=root / "state", config=config)
        mw = MemoryMiddleware(
            memory,
            clock=fixed_clock,
            read_only=read_only,
            slug_fn=slug_fn,
            token_counter=TokenCounter(use_tiktoken=False),
        )
        sc = Scenario(workspace=ws, state_dir=root / "state", memory=memory, middleware=mw)
        for event in Event:
            mw.hooks.on(event, sc.events.append)
        made.append(sc)
        return sc

    yield make
    for sc in made:
        sc.memory.close()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def scripted_reply(sc: Scenario, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The fake model's policy, on memmw chat dicts.

    * Flush turn (its system prompt carries the flush heading): append one note, then reply
      ``sc.flush_reply``.
    * A question about the port: call memory_search, then answer from the tool result.
    * "stay quiet": reply NO_REPLY.
    * Anything else: a short acknowledgement.
    """
    system = " ".join(_text(m["content"]) for m in messages if m["role"] == "system")
    last = messages[-1]
    if FLUSH_MARK in system:
        sc.flush_calls.append(messages)
        if last["role"] == "tool":
            return {"content": sc.flush_reply}
        note = f"- flush note {len(sc.flush_calls)}: user works on the billing service"
        return {
            "content": "",
            "tool_calls": [
                {
                    "id": f"f{len(sc.flush_calls)}",
                    "name": "memory_append",
                    "args": {"content": note},
                }
            ],
        }
    sc.main_calls.append(messages)
    if last["role"] == "tool":
        return {"content": "From memory: " + _text(last["content"])}
    text = _text(last["content"])
    if "port" in text.lower():
        return {
            "content": "",
            "tool_calls": [
                {
                    "id": f"s{len(sc.main_calls)}",
                    "name": "memory_search",
                    "args": {"query": "gateway port", "maxResults": 3},
                }
            ],
        }
    if "stay quiet" in text.lower():
        return {"content": "NO_REPLY"}
    return {"content": f"ack {len(sc.main_calls)}"}
