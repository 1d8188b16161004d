"""Framework-neutral chat messages, model replies and the model-callable convention."""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memmw.text.tokens import content_text

#: A chat message: ``{"role": ..., "content": ...}`` plus optional ``tool_calls`` /
#: ``tool_call_id`` / ``name``.
Message = dict[str, Any]
#: A model: called with a list of messages (and ``tools=`` when it accepts that keyword),
#: returns text or a dict ``{"content": str, "tool_calls": [{"id", "name", "args"}]}``.
ChatModel = Callable[..., Any]


@dataclass(frozen=True)
class ToolCall:
    """One tool call requested by a model.

    Attributes:
        id: Call id (generated when the model gave none).
        name: Tool name.
        args: Parsed arguments.
    """

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ``{"id", "name", "args"}`` form stored on assistant messages."""
        return {"id": self.id, "name": self.name, "args": self.args}


@dataclass(frozen=True)
class Reply:
    """A normalised model reply.

    Attributes:
        text: The visible text (may be empty when there are tool calls).
        tool_calls: Requested tool calls.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()

    def to_message(self) -> Message:
        """The assistant message for the history."""
        message: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        return message


def _parse_call(raw: Any) -> ToolCall | None:
    if not isinstance(raw, Mapping):
        return None
    fn = raw.get("function") if isinstance(raw.get("function"), Mapping) else None
    name = raw.get("name") or (fn.get("name") if fn else None)
    if not isinstance(name, str) or not name:
        return None
    args: Any = raw.get("args")
    if args is None:
        args = raw.get("arguments", fn.get("arguments") if fn else None)
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            args = {"_raw": args}
    if not isinstance(args, Mapping):
        args = {}
    call_id = raw.get("id") or f"call_{uuid.uuid4().hex[:12]}"
    return ToolCall(id=str(call_id), name=name, args=dict(args))


def normalize_reply(reply: Any) -> Reply:
    """Turn a model's return value (str, dict, or object with ``content``) into a Reply."""
    if reply is None:
        return Reply("")
    if isinstance(reply, Reply):
        return reply
    if isinstance(reply, str):
        return Reply(reply)
    if isinstance(reply, Mapping):
        text = content_text(reply.get("content", reply.get("text", "")))
        calls = [c for c in (_parse_call(r) for r in reply.get("tool_calls") or ()) if c]
        return Reply(text, tuple(calls))
    content = getattr(reply, "content", None)
    if content is not None:
        raw_calls = getattr(reply, "tool_calls", None) or ()
        calls = [c for c in (_parse_call(r) for r in raw_calls) if c]
        return Reply(content_text(content), tuple(calls))
    return Reply(str(reply))


def _accepts_tools(model: ChatModel) -> bool:
    try:
        params = inspect.signature(model).parameters
    except (TypeError, ValueError):
        return False
    return "tools" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )


def is_stream(raw: Any) -> bool:
    """True when a model returned a stream of pieces rather than one whole reply."""
    if isinstance(raw, (str, bytes, Mapping, Reply)) or hasattr(raw, "content"):
        return False
    return isinstance(raw, Iterable)


def collect_reply(raw: Any) -> Reply:
    """A model's return value as one :class:`Reply`; a stream of pieces is read to its end.

    Each piece may be text, ``{"content", "tool_calls"}`` or an object with ``content``;
    the texts are joined and the tool calls collected in order.
    """
    if not is_stream(raw):
        return normalize_reply(raw)
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for piece in raw:
        part = normalize_reply(piece)
        texts.append(part.text)
        calls.extend(c.to_dict() for c in part.tool_calls)
    return normalize_reply({"content": "".join(texts), "tool_calls": calls})


def call_model(
    model: ChatModel, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] = ()
) -> Reply:
    """Call ``model`` with a copy of ``messages`` (and ``tools=`` when it takes it).

    A model that answers with a stream (an iterable of text or message pieces) is read to
    the end: the reply is the whole text and every tool call, never the stream's repr.
    """
    batch = [dict(m) for m in messages]
    if tools and _accepts_tools(model):
        return collect_reply(model(batch, tools=list(tools)))
    return collect_reply(model(batch))


def tool_message(call: ToolCall, content: str) -> Message:
    """The tool-result message answering ``call``."""
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
