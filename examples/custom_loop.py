"""Offline demo of memmw in a hand-written agent loop (no API key, no network).

A scripted model stands in for an LLM: it searches memory when asked about the gateway,
saves a note during the pre-compaction flush, and the session is archived on ``/new``.

Run: python examples/custom_loop.py
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from memmw import Memory, MemoryConfig
from memmw.adapters.custom_loop import MemoryAgent
from memmw.config import FlushConfig
from memmw.hooks import Event
from memmw.middleware import MemoryMiddleware
from memmw.text.tokens import TokenCounter

HERE = Path(__file__).resolve().parent
FILLER = "We went through the quarterly infrastructure review in detail. " * 40


def scripted_model(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> Any:
    """A fake LLM: enough behaviour to exercise tools, the flush and plain replies."""
    system = str(messages[0]["content"]) if messages and messages[0]["role"] == "system" else ""
    last = messages[-1]
    if "Memory flush before compaction" in system:
        if last["role"] == "tool":
            return "NO_REPLY"  # the flush turn is silent
        return {
            "content": "",
            "tool_calls": [
                {
                    "id": "flush-1",
                    "name": "memory_append",
                    "args": {
                        "content": "- Reviewed infrastructure; backups move to 03:00 next week."
                    },
                }
            ],
        }
    if last["role"] == "tool":
        snippet = str(last["content"]).split('"snippet": "')[1]
        lines = [ln for ln in snippet.split("\\n") if ln.strip() and not ln.startswith("#")]
        return "From memory: " + (lines[0] if lines else snippet[:80])  # first non-heading line
    if "gateway" in str(last["content"]).lower():
        return {
            "content": "",
            "tool_calls": [
                {"id": "s1", "name": "memory_search", "args": {"query": "gateway runs"}}
            ],
        }
    return "Noted."


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        shutil.copytree(HERE / "workspace", workspace)
        config = MemoryConfig(
            provider="none",  # keyword search only: no embedding model needed
            user_timezone="Europe/Paris",
            # A tiny context window so the flush and a compaction happen within a few turns.
            flush=FlushConfig(
                context_window=6000, reserve_tokens_floor=1500, soft_threshold_tokens=800
            ),
        )
        with Memory(workspace=workspace, state_dir=Path(tmp) / "state", config=config) as memory:
            # The estimate counter keeps the demo deterministic and fully offline.
            middleware = MemoryMiddleware(memory, token_counter=TokenCounter(use_tiktoken=False))
            agent = MemoryAgent(
                scripted_model,
                memory,
                middleware=middleware,
                system_prompt="You are a helpful ops assistant.",
                keep_messages=2,
            )
            agent.middleware.hooks.on(
                Event.FLUSH,
                lambda ctx: print(
                    f"  [flush] cycle {ctx.data['outcome'].decision.cycle}: "
                    f"wrote {list(ctx.data['outcome'].result.writes)}"
                ),
            )
            agent.middleware.hooks.on(
                Event.COMPACTION,
                lambda ctx: print(f"  [compaction] now in cycle {ctx.data['cycle']}"),
            )

            print("== recall")
            print("user> Where does the gateway run?")
            print("agent>", agent.chat("Where does the gateway run?"))

            print("== a long conversation reaches the flush threshold")
            for i in range(6):
                reply = agent.chat(f"Part {i} of the review: {FILLER}")
                print(f"user> part {i} ... agent> {reply}")

            print("== /new archives the session")
            print("agent>", agent.chat("/new"))
            archive = agent.session.previous_archive
            assert archive is not None
            print(f"archive: memory/{archive.name}")
            print(archive.read_text(encoding="utf-8")[:400])
            daily = workspace / "memory" / f"{middleware.now().date().isoformat()}.md"
            print(f"daily note memory/{daily.name}:")
            print(daily.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
