"""Flush coverage: is every message a compaction removes seen by a flush first?

Usage::

    python benchmarks/flush_coverage.py [--conversations 1000] [--seed 7] [--json OUT]

Drives seeded random conversations through both adapters with scripted models (no
network): the custom loop (``MemoryAgent``; plain, streamed-delta and iterator-returning
models) and LangChain ``create_agent`` with the README wiring
(``LangChainMemoryMiddleware(memory, summarization=SummarizationMiddleware(...))``;
invoke, stream and async). Conversations mix chatty turns (user 20-60 tokens, replies
40-120), pastes (large messages), tool calls and restarts (new middleware and agent
objects over the same state folder and checkpointer). Some LangChain runs give the model
a window only 300 tokens above the summarizer's trigger: a flush that does not fit
overflows (``ContextOverflowError``).

Every message carries a unique label; the scripted flush model records the labels of
every message a flush turn was shown. A message is evicted when a compaction removes it
(the custom loop's summarizer receives exactly those; in LangChain, a label that was in the
agent state and is no longer). Reports evicted messages, evicted-unseen (must be 0),
flushes, delta flushes, failed flushes and failed user turns.

The rigs (:class:`LoopRig`, :class:`LangChainRig`) are also driven by the hypothesis state
machine in ``tests/adapters/test_flush_coverage.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from memmw.adapters.custom_loop import MemoryAgent  # noqa: E402
from memmw.config import (  # noqa: E402
    ActiveMemoryConfig,
    BootstrapConfig,
    FlushConfig,
    MemoryConfig,
    SyncConfig,
)
from memmw.engine.memory import Memory  # noqa: E402
from memmw.hooks.registry import Event, HookContext  # noqa: E402
from memmw.middleware import MemoryMiddleware  # noqa: E402
from memmw.text.tokens import TokenCounter  # noqa: E402

FLUSH_MARK = "Memory flush before compaction"
NOW = dt.datetime(2026, 3, 10, 14, 5, 30, tzinfo=dt.timezone.utc)
LABEL = re.compile(r"<<[uapx]\d+>>")
WORDS = (
    "gateway billing deploy nginx port cache queue retry invoice schema token latency "
    "backup cron shard replica tenant webhook quota alert dashboard migration"
).split()


def fixed_clock() -> dt.datetime:
    return NOW


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def labels_of(message: Any) -> set[str]:
    """The labels one message carries: ``<<u1>>`` text labels and tool call ids."""
    if isinstance(message, dict):
        text = _text(message.get("content", ""))
        calls = message.get("tool_calls") or ()
        result = message.get("tool_call_id")
    else:
        text = _text(getattr(message, "content", ""))
        calls = getattr(message, "tool_calls", None) or ()
        result = getattr(message, "tool_call_id", None)
    found = set(LABEL.findall(text))
    for call in calls:
        cid = call.get("id") if isinstance(call, dict) else getattr(call, "id", None)
        if cid:
            found.add(f"call:{cid}")
    if result:
        found.add(f"result:{result}")
    return found


def words(rng: random.Random, tokens: int) -> str:
    """About ``tokens`` tokens of text (the estimate counts ~4 characters a token)."""
    out: list[str] = []
    size = 0
    while size < tokens * 4:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


#: The custom loop compacts at 1500 tokens and flushes at 1250; LangChain's summarizer
#: triggers at ``TRIGGER`` (its flush fires 250 below). The flush budget is 1500 less the
#: flush prompt.
TRIGGER = 1500


def memory_config(*, telemetry: bool = False) -> MemoryConfig:
    return MemoryConfig(
        provider="none",
        user_timezone="Europe/Paris",
        flush=FlushConfig(context_window=2000, reserve_tokens_floor=500, soft_threshold_tokens=250),
        # The notes the conversation writes grow the bootstrap: sized for the small window
        # (prompt and tools take about 1,100 of its 1,500 tokens before compaction), or a
        # long conversation's bootstrap alone fills it and the turn is refused.
        bootstrap=BootstrapConfig(total_max_chars=1200),
        sync=SyncConfig(watch=False, on_search=False),
        active_memory=ActiveMemoryConfig(enabled=False, telemetry=telemetry),
    )


def make_workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The gateway runs on port 8443.\n")
    return ws


@dataclass
class Stats:
    """Counts over one or many conversations."""

    conversations: int = 0
    turns: int = 0
    evicted: int = 0
    evicted_unseen: int = 0
    compactions: int = 0
    flushes: int = 0
    delta_flushes: int = 0
    failed_flushes: int = 0
    flush_turns: int = 0
    unsaved_recorded: int = 0
    failed_turns: int = 0
    tail_overflows: int = 0
    restarts: int = 0
    unseen_examples: list[str] = field(default_factory=list)

    def add(self, other: Stats) -> None:
        for name, value in vars(other).items():
            if isinstance(value, int):
                setattr(self, name, getattr(self, name) + value)
        self.unseen_examples.extend(other.unseen_examples[:5])

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in vars(self).items() if k != "unseen_examples"}
        data["unseen_examples"] = self.unseen_examples[:10]
        return data


class Rig:
    """Common parts: a workspace, the flush recorder, the event counts."""

    def __init__(self, root: Path, *, stream: bool = False, telemetry: bool = False) -> None:
        self.root = root
        self.telemetry = telemetry
        self.ws = make_workspace(root)
        self.state = root / "state"
        self.stream = stream
        self.seen: set[str] = set()
        self.evicted: set[str] = set()
        self.stats = Stats(conversations=1)
        self.counter = 0
        self.flush_fail = False  # the flush model raises (not an overflow)
        self.memory: Memory | None = None
        self.core: MemoryMiddleware | None = None

    def label(self, kind: str) -> str:
        self.counter += 1
        return f"<<{kind}{self.counter}>>"

    def _open_core(self) -> MemoryMiddleware:
        if self.memory is not None:
            self.memory.close()
        self.memory = Memory(workspace=self.ws, state_dir=self.state, config=memory_config(telemetry=self.telemetry))
        core = MemoryMiddleware(
            self.memory, clock=fixed_clock, token_counter=TokenCounter(use_tiktoken=False)
        )
        core.hooks.on(Event.FLUSH, self._on_flush)
        self.core = core
        return core

    def _on_flush(self, ctx: HookContext) -> None:
        outcome = ctx.data["outcome"]
        self.stats.flushes += 1
        self.stats.flush_turns += getattr(outcome, "turns", 1)
        if outcome.decision.reason == "delta":
            self.stats.delta_flushes += 1
        if not outcome.ok:
            self.stats.failed_flushes += 1

    def record_flush_input(self, messages: list[Any]) -> None:
        """Called by the scripted flush model with what one flush turn was shown."""
        for m in messages:
            self.seen |= labels_of(m)

    def check_evicted(self, labels: set[str]) -> None:
        fresh = labels - self.evicted
        self.evicted |= fresh
        self.stats.evicted += len(fresh)
        unseen = sorted(fresh - self.seen)
        self.stats.evicted_unseen += len(unseen)
        self.stats.unseen_examples.extend(unseen[:3])

    def close(self) -> None:
        if self.core is not None and self.memory is not None:
            state = self.core.flush_state
            self.stats.unsaved_recorded = sum(
                s.get("unsavedEvictions", 0)
                for s in state._read_all().values()
                if isinstance(s, dict)
            )
        if self.memory is not None:
            self.memory.close()
            self.memory = None


# ---------------------------------------------------------------------------------------
# Custom loop


class LoopRig(Rig):
    """``MemoryAgent`` with a scripted model; ``stream`` makes every call return an
    iterator of pieces (the flush included)."""

    def __init__(
        self, root: Path, *, stream: bool = False, keep: int = 4, telemetry: bool = False
    ) -> None:
        super().__init__(root, stream=stream, telemetry=telemetry)
        self.keep = keep
        self.agent = self._new_agent()

    def _new_agent(self) -> MemoryAgent:
        core = self._open_core()
        return MemoryAgent(
            self._model,
            core.memory,
            middleware=core,
            system_prompt="You help.",
            keep_messages=self.keep,
            summarizer=self._summarize,
        )

    def _summarize(self, old: Any) -> str:
        self.stats.compactions += 1
        found: set[str] = set()
        for m in old:
            found |= labels_of(m)
        self.check_evicted(found)
        return "they talked about infrastructure"

    def _reply(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        system = _text(messages[0].get("content", "")) if messages else ""
        last = messages[-1]
        if FLUSH_MARK in system:
            if self.flush_fail:
                raise RuntimeError("flush model unavailable")
            if last["role"] == "tool":
                return {"content": "NO_REPLY"}
            self.record_flush_input(messages[1:-1])
            note = "- flush note: the user works on infrastructure"
            call = {"id": f"fl{self.counter}", "name": "memory_append", "args": {"content": note}}
            self.counter += 1
            return {"content": "", "tool_calls": [call]}
        text = _text(last.get("content", ""))
        if last["role"] == "user" and "[tool]" in text:
            cid = f"t{self.counter}"
            self.counter += 1
            call = {"id": cid, "name": "memory_search", "args": {"query": "gateway port"}}
            return {"content": "", "tool_calls": [call]}
        size = self.rng_reply_size(text)
        return {"content": f"{self.label('a')} {words(random.Random(size), size)}"}

    @staticmethod
    def rng_reply_size(text: str) -> int:
        return 40 + (len(text) * 7) % 81  # 40-120 tokens, deterministic

    def _model(self, messages: list[dict[str, Any]], tools: Any = None) -> Any:
        reply = self._reply(messages)
        if not self.stream:
            return reply
        text = reply.get("content", "")
        pieces: list[Any] = [text[i : i + 7] for i in range(0, len(text), 7)]
        if reply.get("tool_calls"):
            pieces.append({"content": "", "tool_calls": reply["tool_calls"]})
        return iter(pieces)

    def send(self, text: str, *, mode: str = "plain") -> None:
        self.stats.turns += 1
        try:
            if mode == "delta":
                self.agent.chat(text, on_delta=lambda _piece: None)
            else:
                self.agent.chat(text)
        except Exception:
            self.stats.failed_turns += 1

    def restart(self) -> None:
        self.stats.restarts += 1
        self.agent = self._new_agent()


# ---------------------------------------------------------------------------------------
# LangChain


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


try:
    from langchain_core.exceptions import ContextOverflowError as _Overflow
except ImportError:  # pragma: no cover - the custom loop runs without LangChain
    _Overflow = Exception  # type: ignore[assignment,misc]


class KeptTailOverflow(_Overflow):  # type: ignore[misc,valid-type]
    """A main call that overflows although it was already compacted (what the summarizer
    keeps is larger than the window): a turn that fails for its keep setting."""


class LangChainRig(Rig):
    """``create_agent`` with the README wiring; a scripted model that overflows past
    ``window`` tokens (counted like the summarizer counts)."""

    def __init__(
        self,
        root: Path,
        *,
        trigger: int = TRIGGER,
        keep: int = 4,
        window_margin: int | None = None,
    ) -> None:
        super().__init__(root)
        from langchain_core.messages.utils import count_tokens_approximately
        from langgraph.checkpoint.memory import InMemorySaver

        self.count = count_tokens_approximately
        self.trigger = trigger
        self.keep = keep
        self.window = trigger + window_margin if window_margin is not None else None
        self.system_tokens: int | None = None
        self.checkpointer = InMemorySaver()
        # Checkpoints written when a run ends (restarts happen between runs): the same
        # state, without a background checkpoint write per step.
        self.durability = "exit"
        self.cfg = {"configurable": {"thread_id": "t"}}
        self.labels: set[str] = set()
        self.agent = self._new_agent()

    def _new_agent(self) -> Any:
        from langchain.agents import create_agent
        from langchain.agents.middleware import SummarizationMiddleware

        from memmw.adapters.langchain import LangChainMemoryMiddleware

        from_tests = HERE / "tests"
        if str(from_tests) not in sys.path:
            sys.path.insert(0, str(from_tests))
        from adapters.lc_fakes import scripted

        core = self._open_core()
        summarizer = SummarizationMiddleware(
            scripted(self._summary), trigger=("tokens", self.trigger), keep=("messages", self.keep)
        )
        self.summarizer = summarizer
        mw = LangChainMemoryMiddleware(middleware=core, summarization=summarizer)
        return create_agent(
            scripted(self._policy), middleware=[mw], checkpointer=self.checkpointer
        )

    def _summary(self, messages: list[Any]) -> str:
        self.stats.compactions += 1
        return "Summary: they talked about infrastructure."

    def _overflow(self, messages: list[Any], *, flush: bool) -> None:
        """The model's window: the trigger, the agent's system prompt and ``margin``
        tokens (a main call at the trigger fits; a flush shown as much may not)."""
        if self.window is None:
            return
        if not flush and self.system_tokens is None:
            self.system_tokens = self.count(messages[:1])
        used = self.count(messages)
        if used > self.window + (self.system_tokens or 0):
            from langchain_core.exceptions import ContextOverflowError

            if not flush and self._nothing_to_compact(messages[1:]):
                # What the summarizer keeps alone passes the window (its keep setting,
                # not the flush): counted apart.
                raise KeptTailOverflow(f"kept tail too long: {used} > {self.window} tokens")
            raise ContextOverflowError(f"prompt is too long: {used} > {self.window} tokens")

    def _nothing_to_compact(self, conversation: list[Any]) -> bool:
        """True when the summarizer could evict nothing but an earlier summary."""
        cut = int(self.summarizer._determine_cutoff_index(conversation))
        first = _text(conversation[0].content) if conversation else ""
        return cut == 0 or (cut == 1 and "summary of the conversation" in first)

    def _policy(self, messages: list[Any]) -> Any:
        from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

        system = messages[0].text if isinstance(messages[0], SystemMessage) else ""
        last = messages[-1]
        self._overflow(messages, flush=FLUSH_MARK in system)
        if FLUSH_MARK in system:
            if self.flush_fail:
                raise RuntimeError("flush model unavailable")
            if isinstance(last, ToolMessage):
                return "NO_REPLY"
            self.record_flush_input(messages[1:-1])
            self.counter += 1
            note = "- flush note: the user works on infrastructure"
            call = {"id": f"fl{self.counter}", "name": "memory_append", "args": {"content": note}}
            return {"content": "", "tool_calls": [call]}
        if isinstance(last, ToolMessage):
            label = self.label("a")
            self.labels.add(label)
            return f"{label} found it"
        if isinstance(last, HumanMessage) and "[tool]" in last.text:
            self.counter += 1
            cid = f"t{self.counter}"
            self.labels |= {f"call:{cid}", f"result:{cid}"}
            call = {"id": cid, "name": "memory_search", "args": {"query": "gateway port"}}
            return {"content": "", "tool_calls": [call]}
        size = 40 + (len(last.text) * 7) % 81
        label = self.label("a")
        self.labels.add(label)
        return f"{label} {words(random.Random(size), size)}"

    def present(self) -> set[str]:
        state = self.agent.get_state(self.cfg)
        found: set[str] = set()
        for m in state.values.get("messages", []):
            found |= labels_of(m)
        return found

    def send(self, text: str, *, mode: str = "invoke") -> None:
        from langchain_core.messages import HumanMessage

        self.stats.turns += 1
        self.labels |= set(LABEL.findall(text))
        payload = {"messages": [HumanMessage(text)]}
        try:
            durable = {"durability": self.durability}
            if mode == "invoke":
                self.agent.invoke(payload, self.cfg, **durable)
            elif mode == "ainvoke":
                asyncio.run(self.agent.ainvoke(payload, self.cfg, **durable))
            else:
                for _chunk in self.agent.stream(
                    payload, self.cfg, stream_mode="messages", **durable
                ):
                    pass
        except Exception as exc:
            if _caused_by(exc, KeptTailOverflow):
                self.stats.tail_overflows += 1
            else:
                self.stats.failed_turns += 1
        gone = self.labels - self.present()
        self.check_evicted(gone)

    def restart(self) -> None:
        self.stats.restarts += 1
        self.agent = self._new_agent()


# ---------------------------------------------------------------------------------------
# Generated conversations


def user_text(rig: Rig, rng: random.Random, kind: str) -> str:
    label = rig.label("u")
    if kind == "paste":
        return f"{label} paste: {words(rng, rng.randint(200, 450))}"
    if kind == "tool":
        return f"{label} [tool] which port does the gateway use?"
    return f"{label} {words(rng, rng.randint(20, 60))}"


def run_conversation(adapter: str, seed: int, root: Path, *, turns: int | None = None) -> Stats:
    """One seeded conversation through ``adapter`` (``loop`` or ``langchain``)."""
    rng = random.Random(seed)
    n = turns if turns is not None else rng.randint(12, 36)
    rig: LoopRig | LangChainRig
    if adapter == "loop":
        rig = LoopRig(root, stream=rng.random() < 0.4, keep=rng.choice([2, 4, 6]))
        modes = ["plain", "delta"]
    else:
        margin = rng.choice([None, None, 300])
        rig = LangChainRig(root, keep=rng.choice([2, 4, 8]), window_margin=margin)
        modes = ["invoke", "invoke", "stream", "ainvoke"]
    try:
        for _ in range(n):
            roll = rng.random()
            if roll < 0.03:
                rig.restart()
                continue
            kind = "paste" if roll < 0.10 else "tool" if roll < 0.20 else "chat"
            rig.send(user_text(rig, rng, kind), mode=rng.choice(modes))
    finally:
        rig.close()
    return rig.stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--turns", type=int, default=None, help="turns per conversation")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    args = parser.parse_args(argv)
    import logging

    logging.disable(logging.CRITICAL)  # failed flushes log errors by design
    started = time.perf_counter()
    per: dict[str, Stats] = {"loop": Stats(), "langchain": Stats()}
    shm = Path("/dev/shm")  # tmpfs where there is one: the flush state's fsyncs cost nothing
    tmp = Path(tempfile.mkdtemp(prefix="flush-coverage-", dir=shm if shm.is_dir() else None))
    try:
        for i in range(args.conversations):
            adapter = "loop" if i % 2 == 0 else "langchain"
            root = tmp / f"c{i}"
            per[adapter].add(run_conversation(adapter, args.seed * 100_003 + i, root, turns=args.turns))
            shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = Stats()
    for stats in per.values():
        total.add(stats)
    report = {
        "conversations": args.conversations,
        "seed": args.seed,
        "seconds": round(time.perf_counter() - started, 1),
        "total": total.to_dict(),
        "by_adapter": {k: v.to_dict() for k, v in per.items()},
    }
    keys = ("conversations", "turns", "compactions", "evicted", "evicted_unseen", "flushes",
            "delta_flushes", "failed_flushes", "flush_turns", "failed_turns", "tail_overflows",
            "restarts")  # fmt: skip
    print(f"{'adapter':<10}" + "".join(f"{k:>15}" for k in keys))
    for name, stats in [*per.items(), ("total", total)]:
        row = stats.to_dict()
        print(f"{name:<10}" + "".join(f"{row[k]:>15}" for k in keys))
    print(f"evicted-unseen: {total.evicted_unseen} ({report['seconds']} s)")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if total.evicted_unseen == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
