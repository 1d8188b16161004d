"""What a memory span costs: without OpenTelemetry, with the API alone, with the SDK.

Usage::

    python benchmarks/tracing.py {none,api,sdk} [--notes 200] [--searches 200]

``none`` hides ``opentelemetry`` (the ``otel`` extra not installed: the shared no-op span),
``api`` uses the API with no SDK configured (OpenTelemetry's own no-op tracer), ``sdk``
exports every span to the SDK's in-memory exporter through a ``SimpleSpanProcessor``.
Prints the best of 5 wall-clock runs of one ``span()`` with two attributes, then of a
keyword-only ``Memory.search_result`` over ``--notes`` one-line notes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import timeit
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("none", "api", "sdk"))
    parser.add_argument("--notes", type=int, default=200)
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    if args.mode == "none":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # import fails

    from memmw import Memory, MemoryConfig, observability

    if args.mode == "sdk":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        observability.use_tracer_provider(provider)

    def one() -> None:
        with observability.span("search", "main") as sp:
            sp.set(search_mode="hybrid", search_partial=False)

    n = 20_000 if args.mode == "sdk" else 100_000
    per = min(timeit.repeat(one, number=n, repeat=5)) / n
    print(f"{args.mode}: span() + set(): {per * 1e6:.2f} us per operation")

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        for i in range(args.notes):
            (ws / "memory" / f"n{i}.md").write_text(
                f"- note {i} about deploy port {i * 7} and cache\n", encoding="utf-8"
            )
        with Memory(workspace=ws, state_dir=Path(tmp) / "st", config=MemoryConfig(provider="none")) as m:
            m.sync()
            k = args.searches
            per = min(timeit.repeat(lambda: m.search_result("deploy port cache"), number=k, repeat=5)) / k
            print(f"{args.mode}: search_result over {args.notes} notes: {per * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
