"""Model replies: whole or streamed, a model's answer is read into one Reply."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memmw.agent.chat import call_model, collect_reply, is_stream


def test_a_streamed_reply_is_read_to_the_end() -> None:
    def streaming(messages: list[dict[str, Any]], tools: Any = None) -> Iterator[Any]:
        yield "Saved "
        yield {"content": "the note."}
        yield {"content": "", "tool_calls": [{"id": "1", "name": "memory_append", "args": {}}]}

    reply = call_model(streaming, [{"role": "user", "content": "hi"}], [{"type": "function"}])
    assert reply.text == "Saved the note."
    assert [c.name for c in reply.tool_calls] == ["memory_append"]
    assert collect_reply(iter(["NO_", "REPLY"])).text == "NO_REPLY"
    assert "iterator" not in call_model(lambda m: iter(["a", "b"]), []).text


def test_whole_replies_are_not_streams() -> None:
    assert not is_stream("text") and not is_stream({"content": "x"}) and not is_stream(b"x")
    assert is_stream(iter([])) and is_stream(["a", "b"])
    assert collect_reply({"content": "x"}).text == "x"
