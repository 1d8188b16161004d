"""OpenTelemetry spans for memory reads and writes: the one home of memmw's tracing.

Every memory operation opens one span through :func:`span` at its choke point:

============  ==========================  ==============================================
operation     span name                   where
============  ==========================  ==============================================
``search``    ``search_memory``           ``Memory.search`` / ``search_result`` (``memory_search``)
``get``       ``memmw.get``               ``Memory.get`` (``memory_get``)
``append``    ``create_memory``           ``memory_append`` (the tool and the flush turn's tool)
``flush``     ``upsert_memory``           the silent pre-compaction flush turn, delta flushes too
``inject``    ``memmw.inject``            the ``[GRAPH MEMORY]`` block and the session bootstrap
``sync``      ``memmw.sync``              ``Memory.sync``
============  ==========================  ==============================================

Names and attributes follow the OpenTelemetry GenAI semantic conventions' memory span
(``open-telemetry/semantic-conventions-genai``, ``docs/gen-ai/gen-ai-spans.md``, section
"Memory", status Development): ``gen_ai.operation.name`` is one of the spec's well-known
values where one applies (``search_memory``, ``create_memory``, ``upsert_memory``) and a
``memmw.``-prefixed custom value where none does (the spec allows custom values); the span
name is the operation name; the kind is ``INTERNAL`` (memmw runs in the caller's process);
``gen_ai.memory.store.id`` is the agent's id (its index namespace);
``gen_ai.memory.record.count`` counts the records returned (search) or attempted (append);
errors set ``error.type`` and an ``ERROR`` status.

**No memory text by default.** Attributes are counts, flags, durations and closed
vocabularies (modes, statuses, reasons); never a query, a snippet, a note's text, a path or
an exception message (an exception's text can quote a note or name a sensitive file):
an error records its type name only. ``tracing.capture_query_text = true`` opts in to the
spec's ``gen_ai.memory.query.text`` on ``search_memory`` spans, redacted by
:func:`memmw.redaction.redact_secrets`.

Optional: until the process loads OpenTelemetry's API (without the ``otel`` extra it never
does) :func:`span` returns one shared no-op object after a dict lookup; memmw never imports
the API itself, since a span cannot record before something sets a tracer provider. With
the API loaded but no SDK configured, OpenTelemetry's own no-op tracer applies.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final, Literal

from memmw.redaction import redact_secrets

log = logging.getLogger(__name__)

Operation = Literal["search", "get", "append", "flush", "inject", "sync"]

#: ``gen_ai.operation.name`` (and the span name) of each memmw operation.
OPERATION_NAMES: Final[Mapping[str, str]] = {
    "search": "search_memory",
    "get": "memmw.get",
    "append": "create_memory",
    "flush": "upsert_memory",
    "inject": "memmw.inject",
    "sync": "memmw.sync",
}

# Attributes the GenAI conventions define.
OPERATION_NAME: Final = "gen_ai.operation.name"
AGENT_ID: Final = "gen_ai.agent.id"
STORE_ID: Final = "gen_ai.memory.store.id"
RECORD_COUNT: Final = "gen_ai.memory.record.count"
QUERY_TEXT: Final = "gen_ai.memory.query.text"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
ERROR_TYPE: Final = "error.type"
#: memmw's own: which memmw operation (``search`` ... ``sync``) the span is.
MEMMW_OPERATION: Final = "memmw.operation"

TRACER_NAME: Final = "memmw"

_Value = bool | int | float | str

_UNRESOLVED: Final = object()
_tracer: Any = _UNRESOLVED


class _NoSpan:
    """The span when tracing is off: every call does nothing (one shared instance)."""

    __slots__ = ()
    recording = False

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def set(self, **attributes: _Value | None) -> None:
        """Ignore the attributes."""

    def fail(self, error_type: str) -> None:
        """Ignore the failure."""

    def query_text(self, text: str, capture: bool) -> None:
        """Ignore the query."""


NO_SPAN: Final = _NoSpan()


class MemorySpan:
    """One memory operation's span: attributes are counts, flags and closed vocabularies.

    Used as a context manager (see :func:`span`): an exception leaving the block sets
    ``error.type`` to its type name and the status to ``ERROR`` (never its message), and is
    re-raised.
    """

    __slots__ = ("_cm", "_span", "recording")

    def __init__(self, cm: Any) -> None:
        self._cm = cm
        self._span: Any = None
        self.recording = False

    def __enter__(self) -> MemorySpan:
        self._span = self._cm.__enter__()
        self.recording = bool(self._span.is_recording())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.fail(_type_name(exc_type))
        # The tracer's own exception recording is off (it would copy the message).
        self._cm.__exit__(exc_type, exc, tb)

    def set(self, **attributes: _Value | None) -> None:
        """Set attributes whose keys are ``memmw.*`` names with ``_`` for ``.`` after the
        operation (``set(search_mode="hybrid")`` sets ``memmw.search.mode``), and the
        GenAI names through :data:`RECORD_COUNT` and friends (``set(**{RECORD_COUNT: 3})``).
        None values are skipped."""
        if not self.recording:
            return
        self._span.set_attributes(_clean(attributes))

    def fail(self, error_type: str) -> None:
        """Mark the operation failed: ``error.type`` and an ``ERROR`` status, both the
        low-cardinality ``error_type`` (an exception's type name, or a memmw outcome such
        as ``rejected``), never a message."""
        if not self.recording:
            return
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute(ERROR_TYPE, error_type)
        self._span.set_status(Status(StatusCode.ERROR, error_type))

    def query_text(self, text: str, capture: bool) -> None:
        """Record the search query (redacted) only when ``capture`` (the opt-in
        ``tracing.capture_query_text``) is on."""
        if capture and self.recording and isinstance(text, str):
            self._span.set_attribute(QUERY_TEXT, redact_secrets(text))


def _type_name(exc_type: type[BaseException]) -> str:
    module = exc_type.__module__
    name = exc_type.__qualname__
    return name if module in ("builtins", "__main__") else f"{module}.{name}"


def _attribute_key(key: str) -> str:
    if key.startswith(("gen_ai.", "memmw.", "error.")):
        return key
    return "memmw." + key.replace("_", ".", 1)


def _clean(attributes: Mapping[str, _Value | None]) -> dict[str, _Value]:
    out: dict[str, _Value] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if not isinstance(value, (bool, int, float, str)):
            raise TypeError(f"span attribute {key} must be a scalar, not {type(value).__name__}")
        out[_attribute_key(key)] = value
    return out


def _resolve() -> Any:
    """The tracer, or None while this process has not loaded OpenTelemetry's API.

    Until something imports ``opentelemetry.trace`` (an SDK set-up, auto-instrumentation,
    a host's own tracing) no tracer provider can be set, so every span would be a
    non-recording one: memmw then opens none, and looks again at the next span (one dict
    lookup) instead of importing the API itself, which cost a fresh process's first search
    about 15 ms. Once the API is loaded the tracer is looked up once.
    """
    global _tracer
    if _tracer is _UNRESOLVED:
        trace = sys.modules.get("opentelemetry.trace")
        if trace is None:
            return None
        _tracer = trace.get_tracer(TRACER_NAME, _version())
    return _tracer


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("memmw")
    except Exception:
        return None


def use_tracer_provider(provider: Any | None) -> None:
    """Trace through ``provider`` (an OpenTelemetry ``TracerProvider``) instead of the
    global one; None goes back to the global provider (``trace.set_tracer_provider``)."""
    global _tracer
    _tracer = _UNRESOLVED if provider is None else provider.get_tracer(TRACER_NAME, _version())


def tracing_available() -> bool:
    """True once this process has loaded OpenTelemetry's API (spans are created)."""
    return _resolve() is not None


def span(
    operation: Operation,
    agent_id: str | None = None,
    **attributes: _Value | None,
) -> MemorySpan | _NoSpan:
    """Open the span of one memory ``operation`` (use it as a context manager).

    ``agent_id`` becomes ``gen_ai.agent.id`` and ``gen_ai.memory.store.id``; ``attributes``
    are set as by :meth:`MemorySpan.set` once the span starts. Without OpenTelemetry this
    returns the shared no-op span.
    """
    tracer = _tracer if _tracer is not _UNRESOLVED else _resolve()
    if tracer is None:
        return NO_SPAN
    from opentelemetry.trace import SpanKind

    name = OPERATION_NAMES[operation]
    start: dict[str, _Value] = {OPERATION_NAME: name, MEMMW_OPERATION: operation}
    if agent_id is not None:
        start[AGENT_ID] = agent_id
        start[STORE_ID] = agent_id
    start.update(_clean(attributes))
    cm = tracer.start_as_current_span(
        name,
        kind=SpanKind.INTERNAL,
        attributes=start,
        record_exception=False,
        set_status_on_exception=False,
    )
    return MemorySpan(cm)
